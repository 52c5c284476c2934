"""The NVSwitch fabric's data-parallel all-reduce (cdma.NVSwitch): a bucket alone on an idle
node takes exactly the ring's time, sharing a GPU's HBM with a copy stretches it by exactly the
copy's HBM bytes, DDP's bucketing, the oracle all-reduces too, and bad input is one line."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import sst_cdma
from components.nvswitch import AllReduceResult
from components.summary_schema import check_summary
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
HGX = REPO / "topologies" / "hgx_h100_cdma.py"
NVLINK4 = 18 * 25e9 * 0.9  # payload bytes/s per GPU per direction (docs/model.md)


def stream(weight: int, moved: int = 0) -> str:
    """One layer with ``weight`` bytes of weights (and of weight gradient). With ``moved``,
    a tensor of that size is offloaded in the forward pass and prefetched right after the
    weight gradient is made (the backward kernel is followed by a sync, so the prefetch is
    issued the moment the gradient is ready)."""
    fwd_move = """offload a layer=l2
compute l2 pass=fwd flops=0 dram=0 time=1ns reads=a
sync l2
""" if moved else ""
    bwd_move = """alloc a
prefetch a layer=l2
wait a
compute l2 pass=bwd flops=0 dram=0 time=1ns reads=a
sync l2
free a
""" if moved else ""
    return f"""\
stream version=1 network=dp batch=1 dtype=float32 policy={'all' if moved else 'none'}
tensor a bytes={moved or 4} kind=activation layer=l1
tensor l1:w bytes={weight} kind=weight layer=l1
tensor l1:dw bytes={weight} kind=gradient layer=l1
phase forward
alloc l1:w
alloc a
compute l1 pass=fwd flops=0 dram=0 time=1ns reads=l1:w writes=a
sync l1
{fwd_move}free a
phase backward
alloc l1:dw
compute l1 pass=bwd flops=0 dram=0 time=1ns reads=l1:w writes=l1:dw
sync l1
{bwd_move}free l1:dw
free l1:w
end
"""


def run_stream(tmp_path: Path, text: str, *opts: str, overrides=None):
    path = tmp_path / "dp.stream"
    path.write_text(text, encoding="utf-8")
    return sst_cdma.run(PASCAL, ["--workload", str(path), "--no-baselines", "--data-parallel",
                                 "--algorithm", "none", *opts], console=io.StringIO(),
                        overrides=overrides)


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_one_bucket_on_an_idle_node_takes_the_rings_time(tmp_path, gpus):
    weight = 10_000_003  # not a multiple of the GPU count
    result = run_stream(tmp_path, stream(weight), "--gpus", str(gpus), "--gpu", "hopper",
                        "--allreduce-step-latency", "2us")
    fabric = result.results["nvswitch"]
    assert isinstance(fabric, AllReduceResult)
    [(nbytes, start, end, idle)] = fabric.buckets
    assert nbytes == weight
    expected = 2 * (gpus - 1) * 2e-6 + 2 * (gpus - 1) / gpus * weight / NVLINK4
    assert abs((end - start) - expected * 1e12) <= 1  # whole picoseconds, rounded up
    assert end - start == idle
    assert fabric.bytes_per_gpu == pytest.approx(2 * (gpus - 1) / gpus * weight)
    # the iteration waits for it: it ends when the bucket is reduced
    assert result.results["gpu0"].iteration_time_ps == end
    summary = result.reports["summary"]
    assert summary["allreduce"]["contention_s"] == 0
    assert summary["allreduce"]["exposed_s"] == pytest.approx((end - start) * 1e-12)
    assert not check_summary(summary)


def test_a_copy_on_the_same_hbm_stretches_it_by_its_hbm_bytes(tmp_path):
    # HBM of 10 GB/s x 0.85: the bottleneck of both the ring (2.5 HBM bytes per byte sent at
    # each GPU) and the prefetch (1 per byte); both start 1 us after the gradient is ready
    # (two steps of 0.5 us; the host link's latency). They share each HBM max-min fairly
    # until the smaller prefetch ends: the ring takes its idle time plus moved / HBM.
    weight, moved = 64 << 20, 16 << 20
    hbm = 10e9 * 0.85
    result = run_stream(tmp_path, stream(weight, moved), "--gpus", "2",
                        "--allreduce-step-latency", "0.5us",
                        overrides={"*.hbm": {"bandwidth": "10GB/s"}})
    [(_, start, end, idle)] = result.results["nvswitch"].buckets
    assert idle == 1_000_000 + int(-(-weight * 2.5 * 1e12 // hbm))  # alone it is HBM-bound
    assert abs((end - start) - idle - moved / hbm * 1e12) <= 2
    summary = result.reports["summary"]["allreduce"]
    assert summary["contention_s"] == pytest.approx(moved / hbm, rel=1e-6)
    # the other way: the prefetch lost time at its HBM beside the ring
    assert summary["offloads_slowed_s"] > 0
    # the same without the copy: no stretch
    alone = run_stream(tmp_path, stream(weight), "--gpus", "2", "--allreduce-step-latency",
                       "0.5us", overrides={"*.hbm": {"bandwidth": "10GB/s"}})
    [(_, start, end, idle)] = alone.results["nvswitch"].buckets
    assert end - start == idle


def test_buckets_follow_ddp(tmp_path):
    # AlexNet's weight gradients in reverse layer order: fc8 (16.4 MB) alone passes DDP's
    # 1 MiB first bucket; fc7 (67.1 MB) then fills a 25 MiB one; fc6 another; the conv layers
    # (9.3 MB together) the last
    result = sst_cdma.run(PASCAL, "--network alexnet --batch 8 --gpus 2 --data-parallel "
                          "--gpu hopper --no-baselines", console=io.StringIO())
    fabric = result.results["nvswitch"]
    assert [b[0] for b in fabric.buckets] == [16388000, 67125248, 151011328,
                                             139776 + 1229824 + 3540480 + 2655744 + 1770496]
    assert fabric.gradient_bytes == sum(b[0] for b in fabric.buckets)
    # one bucket start per bucket, in order, each after the one before
    starts = [b[1] for b in fabric.buckets]
    ends = [b[2] for b in fabric.buckets]
    assert all(e <= s for e, s in zip(ends, starts[1:]))
    # an explicit bucket size applies to the first bucket too (as DDP's bucket_cap_mb)
    one = sst_cdma.run(PASCAL, "--network alexnet --batch 8 --gpus 2 --data-parallel "
                       "--gpu hopper --no-baselines --bucket-size 1GiB", console=io.StringIO())
    assert len(one.results["nvswitch"].buckets) == 1


def test_the_baselines_all_reduce_too_and_offloads_slow_it(tmp_path):
    # HBM of 500 GB/s: the ring and the copies contend for it
    result = sst_cdma.run(PASCAL, "--network alexnet --batch 64 --gpus 2 --data-parallel "
                          "--gpu hopper --policy all", console=io.StringIO(),
                          overrides={"*.hbm": {"bandwidth": "500GB/s"}})
    systems = {r.system for r in result.results.values() if isinstance(r, AllReduceResult)}
    assert systems == {"main", "oracle", "vdnn"}
    allreduce = result.reports["summary"]["allreduce"]
    assert allreduce["contention_s"] > 0
    assert allreduce["slowed_by_offloads_s"] > 0
    oracle = result.results["oracle.nvswitch"]
    assert oracle.time_ps - oracle.idle_ps < allreduce["contention_s"] * 1e12
    assert not check_summary(result.reports["summary"])


def test_the_run_is_deterministic():
    runs = [sst_cdma.run(HGX, "--network alexnet --batch 32 --policy all",
                         console=io.StringIO()).reports["summary"] for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("opts, fault", [
    ("--gpus 1", "--data-parallel needs at least 2 GPUs"),
    ("--bucket-size 0B", "argument --bucket-size: '0B' must be > 0"),
    ("--nvlink-rate fast", "argument --nvlink-rate:"),
])
def test_bad_input_is_one_line(opts, fault):
    with pytest.raises(RunError) as err:
        sst_cdma.run(HGX, f"--network alexnet --batch 8 {opts}", console=io.StringIO())
    assert fault in str(err.value)
    assert "\n" not in str(err.value).strip()


def test_fabric_options_need_data_parallel():
    with pytest.raises(RunError, match="--bucket-size needs --data-parallel"):
        sst_cdma.run(PASCAL, "--network alexnet --batch 8 --gpus 2 --bucket-size 8MiB",
                     console=io.StringIO())


def test_bad_input_from_sst_is_one_line_and_non_zero():
    out = subprocess.run([sys.executable, "-m", "sst_cdma.tools.cli.sst_main", str(HGX), "--",
                          "--network", "alexnet", "--gpus", "1"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1
    assert "--data-parallel needs at least 2 GPUs" in out.stderr


def test_a_data_parallel_gpu_needs_the_fabric(tmp_path):
    script = tmp_path / "lonely.py"
    script.write_text("""
import sst
gpu = sst.Component("gpu0", "cdma.GPU")
gpu.addParam("data_parallel", True)
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {"network": "alexnet", "batch": 8, "policy": "none"})
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
sst.Link("l", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
""", encoding="utf-8")
    with pytest.raises(RunError, match="'data_parallel' needs port 'nvlink'"):
        sst_cdma.run(script, [], console=io.StringIO())


def test_sst_info_lists_the_fabric():
    out = subprocess.run([sys.executable, "-m", "sst_cdma.tools.cli.sst_info", "cdma.NVSwitch"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for word in ("nvlink_links", "nvlink_rate", "step_latency", "bucket", "first_bucket",
                 "gpu%d", "bucket_time_ps", "sent_bytes"):
        assert word in out.stdout, word


def test_the_flows_a_contended_ring_solves_together_do_not_grow_with_the_gpu_count(monkeypatch):
    # with 300 GB/s of HBM the ring, the copies and the kernels contend, so starts and ends
    # re-solve the flows that share resources with them: with a host per GPU, those of one GPU,
    # however many GPUs there are
    from sst_cdma.engine.flows import FlowNetwork

    largest = []
    connected = FlowNetwork._connected

    def spy(seeds):
        group = connected(seeds)
        largest[-1] = max(largest[-1], len(group))
        return group

    monkeypatch.setattr(FlowNetwork, "_connected", staticmethod(spy))
    for gpus in (4, 16):
        largest.append(0)
        result = sst_cdma.run(HGX, f"--network alexnet --batch 32 --policy all --gpus {gpus} "
                              "--gpus-per-host 1 --gpus-per-switch 1 --no-baselines",
                              console=io.StringIO(), overrides={"*.hbm": {"bandwidth": "300GB/s"}})
        assert result.reports["summary"]["allreduce"]["contention_s"] > 0
    assert largest[0] == largest[1] > 1


def test_a_fabric_with_one_gpu_is_refused_in_one_line(tmp_path):
    script = tmp_path / "one.py"
    script.write_text("""
import sst
gpu = sst.Component("gpu0", "cdma.GPU")
gpu.addParam("data_parallel", True)
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {"network": "alexnet", "batch": 8, "policy": "none"})
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
sst.Link("l", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
fabric = sst.Component("fabric", "cdma.NVSwitch")
sst.Link("n", "0ps").connect((gpu, "nvlink"), (fabric, "gpu0"))
""", encoding="utf-8")
    with pytest.raises(RunError) as err:
        sst_cdma.run(script, [], console=io.StringIO())
    assert "fabric (cdma.NVSwitch): data parallel needs at least 2 GPUs" in str(err.value)
    assert "\n" not in str(err.value).strip()
