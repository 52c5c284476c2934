"""Building blocks: CRC combination, work splitting, output buffers, SIMD switch."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sst_cdma.codecs import buffers, checksum, parallel, simd


@settings(max_examples=200, deadline=None)
@given(a=st.binary(max_size=300), b=st.binary(max_size=300), start=st.integers(0, 2**32 - 1))
def test_crc32_combine_matches_zlib(a: bytes, b: bytes, start: int) -> None:
    ca = zlib.crc32(a, start)
    assert checksum.crc32_combine(ca, zlib.crc32(b), len(b)) == zlib.crc32(a + b, start)


def test_parallel_crc32_matches_zlib() -> None:
    data = np.random.default_rng(0).integers(0, 256, (20 << 20) + 13, dtype=np.uint8)
    assert checksum.PARALLEL_MIN_BYTES <= data.size
    assert checksum.crc32(data) == zlib.crc32(data)
    assert checksum.crc32(data, 12345) == zlib.crc32(data, 12345)
    pending = checksum.crc32_start(data[5:], 7)
    assert pending() == zlib.crc32(data[5:], 7)


@settings(max_examples=200, deadline=None)
@given(total=st.integers(0, 10_000), parts=st.integers(1, 64))
def test_split_ranges_partition(total: int, parts: int) -> None:
    ranges = parallel.split_ranges(total, parts)
    assert len(ranges) == max(1, min(parts, total))
    assert ranges[0][0] == 0 and ranges[-1][1] == total
    for (_, hi), (lo, _) in zip(ranges, ranges[1:]):
        assert hi == lo
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_run_ranges_covers_everything_in_order() -> None:
    seen: list[tuple[int, int]] = []
    out = parallel.run_ranges(lambda lo, hi: (seen.append((lo, hi)), hi - lo)[1],
                              1000, parallel.PARALLEL_MIN_ITEMS)
    assert sum(out) == 1000
    assert sorted(seen)[0][0] == 0 and sorted(seen)[-1][1] == 1000
    assert parallel.run_ranges(lambda lo, hi: (lo, hi), 1000, 10) == [(0, 1000)]


def test_job_propagates_errors_after_all_tasks_stop() -> None:
    done: list[int] = []

    def task(i: int) -> int:
        if i == 3:
            raise KeyError("boom")
        done.append(i)
        return i

    with pytest.raises(KeyError):
        parallel.run_tasks([lambda i=i: task(i) for i in range(8)])
    assert 3 not in done
    assert parallel.run_tasks([lambda i=i: i * i for i in range(10)]) == [i * i for i in
                                                                          range(10)]


@pytest.mark.parametrize("size", [0, 1, 100, buffers.IN_PLACE_MIN_BYTES,
                                  buffers.IN_PLACE_MIN_BYTES * 5 + 3])
def test_output_buffer(size: int) -> None:
    buf = buffers.OutputBuffer(size)
    view = buf.view
    assert view.dtype == np.uint8 and view.size == size and view.flags.writeable
    view[:] = np.arange(size, dtype=np.uint64).astype(np.uint8)
    out = buf.finish()
    assert type(out) is bytes and len(out) == size
    assert out == np.arange(size, dtype=np.uint64).astype(np.uint8).tobytes()
    assert not hasattr(buf, "view")


def test_output_buffer_view_keeps_storage_alive() -> None:
    view = buffers.OutputBuffer(buffers.IN_PLACE_MIN_BYTES).view  # buffer object dropped
    view[:] = 7  # must not write into freed memory
    assert int(view.sum()) == 7 * view.size


def test_simd_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    support = simd.host_support()
    assert set(support) == {1, 2, 4, 8}
    monkeypatch.setenv("SST_CDMA_CODECS_SIMD", "0")
    assert not any(simd.enabled(k) for k in (1, 2, 4, 8))
    monkeypatch.delenv("SST_CDMA_CODECS_SIMD")
    assert [simd.enabled(k) for k in (1, 2, 4, 8)] == [support[k] for k in (1, 2, 4, 8)]


@pytest.mark.timeout(60)
def test_job_completes_when_pool_threads_are_all_busy() -> None:
    import threading

    release = threading.Event()
    blockers = [parallel._executor().submit(release.wait) for _ in range(parallel.num_threads())]
    try:
        assert parallel.run_tasks([lambda i=i: i + 1 for i in range(6)]) == list(range(1, 7))
    finally:
        release.set()
        for b in blockers:
            b.result()


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_codecs_work_in_a_forked_child() -> None:
    import os

    from sst_cdma import codecs

    x = np.zeros(3 << 20, np.float32)
    x[::5] = 1.0
    codecs.decompress(codecs.compress(x, "zvc"))  # the parent's pool now exists
    pid = os.fork()
    if pid == 0:  # child: must not hang on the parent's (threadless) pool
        ok = np.array_equal(codecs.decompress(codecs.compress(x, "zvc")), x)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


@pytest.mark.parametrize("unit", ["<u1", "<u2", "<u4"])
def test_plain_python_field_helpers_match_the_compiled_ones(unit):
    import numba

    from sst_cdma.codecs.bitops import load_u32, store_u32

    @numba.njit
    def compiled_store(q, pos, value):
        store_u32(q, pos, value)

    plain, compiled = np.zeros(8, unit), np.zeros(8, unit)
    store_u32(plain, 4 // np.dtype(unit).itemsize, 0xDEADBEEF)
    compiled_store(compiled, 4 // np.dtype(unit).itemsize, np.uint32(0xDEADBEEF))
    assert plain.tobytes() == compiled.tobytes()
    assert load_u32(plain, 4 // np.dtype(unit).itemsize) == 0xDEADBEEF
