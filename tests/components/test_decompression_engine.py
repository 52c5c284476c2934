"""Blackwell's Decompression Engine (``--engine blackwell-de``, the codec's ``engine`` param):
prefetches decompress in the copy engine, offloads are compressed by SM kernels on the compute
stream, and buffers too big for the engine decompress on the SMs (docs/model.md)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.runner import RunError

REPO = Path(__file__).resolve().parents[2]
GB200 = REPO / "topologies" / "gb200_cdma.py"
RUN = ("--network", "alexnet", "--batch", "16", "--policy", "all")


def summary(*opts: str) -> dict:
    """The summary of one GB200 run."""
    return sst_cdma.run(GB200, [*RUN, *opts], console=io.StringIO()).reports["summary"]


def test_offloads_pay_their_sm_compression_on_the_compute_stream():
    slow = summary("--engine", "blackwell-de", "--sm-compress-throughput", "50GB/s")
    fast = summary("--engine", "blackwell-de", "--sm-compress-throughput", "100GB/s")
    assert slow["engine"] == "blackwell-de" and slow["algorithm"] == "lz4"
    assert slow["codec_units"] == 1 and slow["codec_unit_throughput_Bps"] == 600e9
    # every offloaded byte is compressed once by the SMs: raw / throughput
    assert slow["sm_codec_time_s"] == pytest.approx(slow["offloaded_bytes"] / 50e9, rel=1e-3)
    assert fast["sm_codec_time_s"] == pytest.approx(slow["sm_codec_time_s"] / 2, rel=1e-3)
    # it is compute-stream time, so it lengthens the iteration against the compressing engine
    cdma = summary("--algorithm", "lz4")
    assert "engine" not in cdma and "sm_codec_time_s" not in cdma
    assert slow["compute_time_s"] == pytest.approx(
        cdma["compute_time_s"] + slow["sm_codec_time_s"], rel=1e-3)
    assert slow["iteration_time_s"] > fast["iteration_time_s"] > cdma["iteration_time_s"]
    assert slow["wire_bytes"] == cdma["wire_bytes"]  # the same LZ4 bytes cross the link


def test_buffers_over_the_engine_s_limit_decompress_on_the_sms():
    inside = summary("--engine", "blackwell-de")
    over = summary("--engine", "blackwell-de", "--de-chunk", "8MiB",
                   "--sm-decompress-throughput", "200GB/s")
    extra = over["sm_codec_time_s"] - inside["sm_codec_time_s"]
    prefetched = over["extra_dram_bytes"] - over["offloaded_bytes"]
    assert extra == pytest.approx(prefetched / 200e9, rel=1e-3)
    assert over["iteration_time_s"] > inside["iteration_time_s"]


@pytest.mark.parametrize("opts,message", [
    (("--engine", "blackwell-de", "--algorithm", "zvc"),
     "--engine blackwell-de contradicts --algorithm zvc: the Decompression Engine"),
    (("--sm-compress-throughput", "10GB/s"),
     "--sm-compress-throughput needs --engine blackwell-de"),
    (("--engine", "de"), "argument --engine: 'de' is not one of cdma, blackwell-de"),
])
def test_bad_engine_options_are_one_line_naming_the_option(opts, message):
    with pytest.raises(RunError, match=message):
        summary(*opts)


SYSTEM = """import sst
gpu = sst.Component("gpu0", "cdma.GPU")
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams({"network": "alexnet",
                                                                   "batch": 8})
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
dma = sst.Component("gpu0.dma", "cdma.CDMAEngine")
codec = dma.setSubComponent("codec", "cdma.ZVC")
codec.addParam("engine", "blackwell-de")
link = sst.Component("gpu0.pcie", "cdma.PCIeBridge")
host = sst.Component("host", "cdma.HostMemory")
sst.Link("a", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("b", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("c", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("d", "0ps").connect((dma, "pcie"), (link, "gpu"))
sst.Link("e", "0ps").connect((link, "host"), (host, "pcie0"))
"""


def test_a_hand_wired_engine_refuses_a_codec_the_de_does_not_take(tmp_path):
    script = tmp_path / "system.py"
    script.write_text(SYSTEM, encoding="utf-8")
    with pytest.raises(RunError, match="engine 'blackwell-de' decompresses Snappy, LZ4, "
                                       "Deflate and GZip only, not zvc"):
        sst_cdma.run(script, console=io.StringIO())
