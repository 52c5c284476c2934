"""The host CPU's codec throughput table (sst_cdma.model.cpu_codecs): every registered codec
measured on every simulated element type, and the time of a bucket's codec work."""
from __future__ import annotations

import pytest

from sst_cdma import codecs
from sst_cdma.model.cpu_codecs import (CPU_CODEC_THROUGHPUT, CpuCodecError, cpu_codec_ps,
                                       cpu_codec_rates)
from sst_cdma.model.dtypes import DTYPES


def test_every_registered_codec_is_measured_on_every_element_type():
    for codec in codecs.ALGORITHMS:
        for dtype in DTYPES:
            compress, decompress = cpu_codec_rates(codec, dtype)
            assert compress > 0 and decompress > 0
    assert len(CPU_CODEC_THROUGHPUT) == len(codecs.ALGORITHMS) * len(DTYPES)


def test_the_codec_time_is_each_direction_at_its_rate_over_the_cores():
    compress, decompress = cpu_codec_rates("zstd", "bfloat16")
    ps = cpu_codec_ps("zstd", "bfloat16", 10**9, 2 * 10**9, 4)
    assert ps == pytest.approx((1e9 / decompress + 2e9 / compress) / 4 * 1e12, abs=1)
    assert cpu_codec_ps("zstd", "bfloat16", 0, 0, 4) == 0


def test_an_unmeasured_pair_is_one_line_saying_what_is():
    with pytest.raises(CpuCodecError) as err:
        cpu_codec_rates("brotli", "float32")
    assert "'brotli' on float32" in str(err.value) and "measured: codecs" in str(err.value)
