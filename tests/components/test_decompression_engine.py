"""Blackwell's Decompression Engine (``--engine blackwell-de``, the codec's ``engine`` param):
prefetches decompress in the copy engine, offloads are compressed by SM kernels on the compute
stream, and buffers too big for the engine decompress on the SMs (docs/model.md)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
GB200 = REPO / "topologies" / "gb200_cdma.py"
RUN = ("--network", "alexnet", "--batch", "16", "--policy", "all")


def run(*opts: str) -> sst_cdma.RunResult:
    """One GB200 run."""
    return sst_cdma.run(GB200, [*RUN, *opts], console=io.StringIO())


def summary(*opts: str) -> dict:
    """The summary of one GB200 run."""
    return run(*opts).reports["summary"]


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
    over_run = run("--engine", "blackwell-de", "--de-chunk", "8MiB",
                   "--sm-decompress-throughput", "200GB/s")
    over = over_run.reports["summary"]
    extra = over["sm_codec_time_s"] - inside["sm_codec_time_s"]
    prefetched = over_run.results["gpu0"].prefetched_bytes
    assert extra == pytest.approx(prefetched / 200e9, rel=1e-3)
    assert over["iteration_time_s"] > inside["iteration_time_s"]


def hbm_traffic(result: sst_cdma.RunResult) -> tuple[int, float]:
    """The engine's DRAM traffic as the summary reports it, and the bytes GPU DRAM moved (its
    ``bytes_moved`` statistic: without contention kernels take no DRAM flows, so only the
    engine's transfers count)."""
    stats = result.statistics
    moved = stats[(stats["ComponentName"] == "gpu0.hbm") &
                  (stats["StatisticName"].str.strip() == "bytes_moved")]
    return result.reports["summary"]["extra_dram_bytes"], float(moved["Sum.f64"].iloc[0])


@pytest.mark.parametrize("opts,offload,prefetch", [
    (("--engine", "blackwell-de"), "wire", "raw"),  # the DE writes decompressed bytes
    # buffers too big for the DE: the SMs decompress them in DRAM
    (("--engine", "blackwell-de", "--de-chunk", "8MiB"), "wire", "wire"),
    ((), "raw", "raw"),                             # cDMA (de)compresses on the way
])
def test_the_engine_moves_in_dram_what_lies_there(opts, offload, prefetch):
    """On the DE an offload reads the SMs' compressed buffer from DRAM, a prefetch the engine
    decompresses writes raw bytes, one the SMs decompress lands compressed; the cDMA engine
    reads and writes raw bytes both ways. The summary's DRAM traffic and GPU DRAM's own count
    of what the engine's flows moved agree."""
    result = run(*opts, "--algorithm", "lz4", "--no-contention")
    gpu = result.results["gpu0"]
    assert gpu.wire_bytes < gpu.offloaded_bytes  # LZ4 gains: the two counts differ
    side = {"offload": {"wire": gpu.wire_bytes, "raw": gpu.offloaded_bytes},
            "prefetch": {"wire": gpu.prefetch_wire_bytes, "raw": gpu.prefetched_bytes}}
    expected = side["offload"][offload] + side["prefetch"][prefetch]
    reported, moved = hbm_traffic(result)
    assert reported == expected
    assert moved == pytest.approx(expected, rel=1e-9)


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


PASCAL = REPO / "topologies" / "pascal_cdma.py"


@pytest.mark.parametrize("rate", ["25GB/s", "200GB/s"])
def test_the_planner_prices_sm_compression_on_the_compute_stream(rate):
    """``--policy auto`` on the Decompression Engine, where memory is short (SqueezeNet at
    batch 640 on 16 GiB): the plan's predicted time includes the SM compression kernels its
    offloads run on the compute stream, so it is the simulated time (it was 1.4% short at
    25 GB/s, the kernel left out); at 200 GB/s the plan compresses and pays for it."""
    s = sst_cdma.run(PASCAL, ["--network", "squeezenet", "--batch", "640", "--policy", "auto",
                              "--no-baselines", "--engine", "blackwell-de",
                              "--sm-compress-throughput", rate],
                     console=io.StringIO(), record_statistics=False).reports["summary"]
    assert s["fits_in_memory"]
    predicted = s["plan"]["planner"]["predicted_time_s"]
    assert abs(predicted - s["iteration_time_s"]) / s["iteration_time_s"] < 0.002
    if rate == "200GB/s":
        assert s["plan"]["counts"]["compress"] > 0 and s["sm_codec_time_s"] > 0


def test_the_console_says_the_de_runs_lz4_because_it_cannot_decode_zvc():
    console = io.StringIO()
    sst_cdma.run(GB200, [*RUN, "--engine", "blackwell-de"], console=console)
    text = console.getvalue()
    assert "Blackwell DE lz4" in text.splitlines()[0]
    engine = next(ln for ln in text.splitlines() if ln.startswith("Blackwell DE engine:"))
    assert "lz4: the DE's default codec; it decodes lz4 and zlib, not zvc" in engine
    console = io.StringIO()
    sst_cdma.run(GB200, [*RUN, "--engine", "blackwell-de", "--algorithm", "zlib"],
                 console=console)
    assert "not zvc" not in console.getvalue()  # zlib was asked for: nothing to explain
