"""topologies/pipeline_cdma.py with --optimizer-states host: ZeRO-Offload under data
parallelism, each rank's CPU Adam on its 1/dp partition, the GPUs of a node sharing their
socket's host CPU and DRAM (docs/parallel.md, "ZeRO-Offload under data parallelism")."""
from __future__ import annotations

import io
import re

import pytest

import sst_cdma
from components.host_cpu import HostCPUResult
from components.nvme import NVMeResult
from components.summary_schema import check_summary
from sst_cdma.builder.stage_hosts import replicas_share_hosts
from sst_cdma.engine.errors import RunError
from sst_cdma.model.hosts import PLATFORMS
from workloads.vdnn import OPTIMIZERS

PIPELINE = "topologies/pipeline_cdma.py"
OPTS = ("--network gpt2_small --gpu hopper --micro-batches 1 --batch 1 --seq-len 128 "
        "--dtype float16 --optimizer-states host")


def run(opts: str):
    """The run's result, summary and console text."""
    console = io.StringIO()
    result = sst_cdma.run(PIPELINE, f"{OPTS} {opts}", console=console)
    summary = result.reports["summary"]
    assert check_summary(summary) == []
    return result, summary, console.getvalue()


def states_of(summary, gpu: str) -> dict:
    """The ``model_states`` of one GPU's summary entry (the summary's own with one GPU)."""
    if "gpus" not in summary:
        return summary["model_states"]
    (entry,) = [g for g in summary["gpus"] if g["gpu"] == gpu]
    return entry["model_states"]


def test_each_rank_s_cpu_step_shrinks_with_its_partition():
    grads, alone = {}, {}
    for dp in (1, 2, 4):
        opts = "--pp 1" if dp == 1 else f"--pp 1 --dp {dp} --zero 2"
        _, summary, _ = run(opts)
        states = states_of(summary, "gpu0" if dp == 1 else "gpu0-pp0-dp0")
        grads[dp], alone[dp] = states["gradients_to_host_bytes"], states["cpu_step_alone_s"]
    params = grads[1] // 2  # float16 gradients of the whole stage (one bucket)
    for dp in (2, 4):
        # the rank copies its padded partition, ceil(P / dp) parameters, and steps it alone
        # in 1/dp of the time (the step is linear in its parameters)
        assert grads[dp] == 2 * -(-params // dp)
        assert alone[dp] * dp == pytest.approx(alone[1], rel=1e-6)


def test_eight_ranks_of_a_node_queue_on_their_socket_s_cpu():
    result, summary, console = run("--pp 1 --dp 8 --zero 2")
    cpus = {name: r for name, r in result.results.items() if isinstance(r, HostCPUResult)}
    assert sorted(cpus) == ["node0.cpu0", "node0.cpu1"]
    host = PLATFORMS["dgx-h100"]
    for name, cpu in cpus.items():
        # a DGX H100 socket: its 4 GPUs (two PCIe switches of two) step on its cores and DRAM
        socket = int(name[-1])
        assert cpu.gpus == [f"gpu{r}-pp0-dp{r}" for r in range(4 * socket, 4 * socket + 4)]
        assert cpu.platform == "dgx-h100" and cpu.cores == host.cores_per_socket
        assert cpu.dram_bandwidth == host.dram_bandwidth
        ranks = [states_of(summary, gpu) for gpu in cpu.gpus]
        alone = ranks[0]["cpu_step_alone_s"] * 1e12
        assert all(r["cpu_step_alone_s"] * 1e12 == alone for r in ranks)
        # the steps run one at a time on every core, back to back, each at least as long
        # as alone: the last of the four ends 4 steps after the first began, plus at most
        # the DRAM time of the copies that share the socket's DRAM with them
        steps = cpu.steps
        assert len(steps) == 4
        assert all(b[1] == a[2] for a, b in zip(steps, steps[1:]))
        assert all(end - start >= alone - 1 for _, start, end in steps)
        copies = sum(r["gradients_to_host_bytes"] + r["weights_to_gpu_bytes"] for r in ranks)
        span = steps[-1][2] - steps[0][1]
        assert 4 * alone - 4 <= span <= 4 * alone + copies / cpu.dram_bandwidth * 1e12
        # the ranks' GPUs waited for the CPU in turn: each one's wait includes the steps
        # queued before its own
        waits = sorted(r["host_cpu_wait_s"] * 1e12 for r in ranks)
        for k, wait in enumerate(waits):
            assert wait >= (k + 1) * alone - 4
    stage = summary["pipeline"]["stages"][0]["host"]
    assert stage["gpus_on_cpu"] == 4 and stage["cpu"].startswith("node0.cpu")
    assert stage["cpu_wait_time_s"] >= 4 * stage["cpu_step_alone_s"] - 4e-12
    assert "shared by 4 GPUs" in console
    assert "every replica simulated" in console  # replicas share the sockets


def statistics(result) -> dict[tuple, tuple]:
    """Every statistic row but the fabric's, keyed by (element, statistic, sub-id), with
    replica 1's GPUs (ranks 4-7, ``gpuR-tpT-pp0-dp1...``) and socket 1's host and CPU
    (``node0.host1``, ``node0.cpu1``) named as their replica-0 twins."""
    values = [c for c in result.statistics.columns if "." in c or c == "SimTime"]
    out: dict[tuple, list] = {}
    for row in result.statistics.to_dict("records"):
        name = row["ComponentName"]
        if name == "fabric":
            continue
        m = re.match(r"gpu(\d+)(-tp\d+-pp0)-dp1(.*)$", name)
        if m:
            name = f"gpu{int(m.group(1)) - 4}{m.group(2)}-dp0{m.group(3)}"
        name = re.sub(r"^node0\.(host|cpu)1$", r"node0.\g<1>0", name)
        key = (name, row["StatisticName"], row["StatisticSubId"])
        out.setdefault(key, []).append(tuple(row[c] for c in values))
    return {k: tuple(v) for k, v in out.items()}


def test_one_replica_stands_for_its_twins_when_they_share_no_socket():
    # tp 4: replica 0's GPUs fill socket 0, replica 1's socket 1
    r_one, one, text = run("--pp 1 --tp 4 --dp 2 --zero 1")
    r_every, every, _ = run("--pp 1 --tp 4 --dp 2 --zero 1 --simulate-every-rank")
    # every statistic of every GPU (and its HBM, engine, link, model-state driver), host
    # memory and host CPU: each replica's (and socket's) equal to replica 0's, byte for byte
    stats_one, stats_every = statistics(r_one), statistics(r_every)
    assert stats_one.keys() == stats_every.keys()
    assert any(key[0] == "node0.cpu0" for key in stats_one)
    for key, rows in stats_every.items():
        assert len(rows) == 2 and set(rows) == set(stats_one[key]), key
    assert "replica 0 simulated" in text
    p_one, p_every = one["pipeline"], every["pipeline"]
    assert {k: v for k, v in p_one.items() if k != "ranks"} == \
        {k: v for k, v in p_every.items() if k != "ranks"}
    assert p_one["stages"][0]["host"]["gpus_on_cpu"] == 4
    twins = {g["gpu"]: g["model_states"] for g in every["gpus"]}
    for t in range(4):  # rank t + 4 x dp
        mine = states_of(one, f"gpu{t}-tp{t}-pp0-dp0")
        assert mine == twins[f"gpu{t}-tp{t}-pp0-dp0"] == twins[f"gpu{t + 4}-tp{t}-pp0-dp1"]


@pytest.mark.parametrize("node, tp, pp, dp, shared", [
    (None, 1, 2, 4, False),        # no nodes: each stage a host of its own
    ("dgx_h100", 2, 2, 1, False),  # one replica
    ("dgx_h100", 1, 1, 8, True),   # ranks 0-3 on socket 0: replicas 0-3
    ("dgx_h100", 2, 2, 2, True),   # ranks 0, 1 and 2, 3 (replica 1) on socket 0
    ("dgx_h100", 4, 2, 2, False),  # each replica's stage fills a socket
    ("dgx_h100", 8, 2, 4, False),
    ("dgx_a100", 2, 1, 2, True),
])
def test_which_layouts_share_a_socket_across_replicas(node, tp, pp, dp, shared):
    assert replicas_share_hosts(node, tp, pp, dp) is shared


def dp_moved(result, gpu: str) -> dict[str, int]:
    """The bytes rank ``gpu`` put on the fabric over its dp group, by collective kind."""
    port = result.results[f"{gpu}:collectives[0]"]
    out: dict[str, int] = {}
    for op, group, *_, nbytes, _, _ in port.collectives:
        if group == "dp":
            out[op] = out.get(op, 0) + nbytes
    return out


@pytest.mark.parametrize("dp", [2, 4])
def test_zero_3_offload_moves_each_rank_s_shards_and_steps_1_over_dp(dp):
    _, whole, _ = run("--pp 1")
    result, summary, _ = run(f"--pp 1 --dp {dp} --zero 3")
    on_gpu, gpu_summary, _ = run(f"--pp 1 --dp {dp} --zero 3 --optimizer-states gpu")
    alone = states_of(whole, "gpu0")
    params = alone["gradients_to_host_bytes"] // 2  # the stage's float16 gradients, all
    for g in summary["gpus"]:
        mine = g["model_states"]
        # the rank's gradient shards go to the host and its 16-bit shards come back: 1/dp
        # of the stage's, each layer padded to dp parts (at most dp - 1 elements for each of
        # gpt2_small's fewer than 100 weighted layers)
        assert mine["gradients_to_host_bytes"] == mine["weights_to_gpu_bytes"]
        shard = mine["gradients_to_host_bytes"] // 2
        assert params <= dp * shard <= params + 100 * (dp - 1)
        # the CPU steps the shard alone in its share of the whole stage's time
        assert mine["cpu_step_alone_s"] == pytest.approx(
            alone["cpu_step_alone_s"] * shard / params, rel=1e-6)
        # ZeRO 3's passes move the same bytes as with the states on the GPU (replica 0 alone
        # simulated there: its twins are identical): nothing is gathered after the host's step
        assert dp_moved(result, g["gpu"]) == dp_moved(on_gpu, "gpu0-pp0-dp0")
        assert set(dp_moved(result, g["gpu"])) == {"all_gather", "reduce_scatter"}
    # the optimizer states' shard leaves the GPU
    assert summary["pipeline"]["stages"][0]["peak_memory_bytes"] < \
        gpu_summary["pipeline"]["stages"][0]["peak_memory_bytes"]


def test_the_delayed_update_is_never_slower():
    _, now, _ = run("--pp 2 --dp 2 --zero 1")
    _, delayed, _ = run("--pp 2 --dp 2 --zero 1 --delayed-update")
    assert delayed["pipeline"]["step_time_s"] <= now["pipeline"]["step_time_s"]


@pytest.mark.parametrize("opts, message", [
    ("--pp 2 --dp 2 --zero 0", "--optimizer-states host with --dp 2 and --zero 0: "
     "ZeRO-Offload keeps each rank's partition"),
    ("--pp 2 --optimizer sgd", "give --optimizer adam, not sgd"),
    ("--pp 2 --optimizer-states nvme", "--optimizer-states nvme needs an NVMe SSD to hold "
     "the states: the hosts have none (give --nvme N, N >= 1)"),
    ("--pp 2 --nvme 1 --nvme-preset nope", "--nvme-preset 'nope' is not a known SSD"),
])
def test_a_bad_offload_option_is_one_line(opts, message):
    with pytest.raises(RunError) as info:
        run(opts)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_the_delayed_update_needs_the_states_on_the_host():
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, OPTS.replace("--optimizer-states host", "--delayed-update"),
                     console=io.StringIO())
    assert "--delayed-update overlaps" in str(info.value)


def test_zero_infinity_puts_each_rank_s_partition_on_its_socket_s_ssds():
    # run's OPTS say host; the later --optimizer-states wins
    result, summary, console = run("--pp 1 --dp 8 --zero 2 --nvme 2 --optimizer-states nvme")
    assert "ZeRO-Infinity" in console
    states = {g["gpu"]: g["model_states"] for g in summary["gpus"]}
    params = -(-states["gpu0-pp0-dp0"]["gradients_to_host_bytes"] // 2)
    partition = OPTIMIZERS["adam"].state_bytes(params, "float16")
    for s in states.values():
        # its partition's states read from the drives before its step, written back after
        assert s["states_from_nvme_bytes"] == s["states_to_nvme_bytes"] == partition
        assert s["nvme_state_bytes"] == {"bucket0:s": partition}
    drives = {name: r for name, r in result.results.items() if isinstance(r, NVMeResult)}
    assert sorted(drives) == [f"node0.host{k}.nvme{d}" for k in (0, 1) for d in (0, 1)]
    step = summary["pipeline"]["step_time_s"]
    for k in (0, 1):
        mine = [r for name, r in drives.items() if name.startswith(f"node0.host{k}.")]
        # the socket's two drives hold its four ranks' partitions, striped
        assert sum(r.bytes_read for r in mine) == sum(r.bytes_written for r in mine) \
            == 4 * partition
        # and no faster than the drives can read them and write them back
        read = 4 * partition / sum(min(r.read_rate_Bps, r.link_bandwidth_Bps) for r in mine)
        write = 4 * partition / sum(min(r.write_rate_Bps, r.link_bandwidth_Bps)
                                    for r in mine)
        assert step > max(read, write)


def test_the_chain_of_identical_layers_has_no_states_to_offload():
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, "--pp 2 --optimizer-states host", console=io.StringIO())
    assert "--optimizer-states need --network" in str(info.value)


def test_zero_2_offload_keeps_the_gradient_shard_and_copies_the_same_partition():
    _, zero1, _ = run("--pp 1 --dp 4 --zero 1")
    _, zero2, _ = run("--pp 1 --dp 4 --zero 2")
    a, b = zero1["pipeline"]["stages"][0], zero2["pipeline"]["stages"][0]
    one, two = states_of(zero1, "gpu0-pp0-dp0"), states_of(zero2, "gpu0-pp0-dp0")
    # the rank copies its partition once either way (ZeRO 2's shard, after the last pass)
    assert one["gradients_to_host_bytes"] == two["gradients_to_host_bytes"] > 0
    whole = sum(t.bytes for t in stage_tensors(4, 1).values()
                if t.kind == "gradient" and t.name.endswith(":dw"))
    shard = two["gradients_to_host_bytes"]
    assert shard * 4 == pytest.approx(whole, rel=1e-6)
    # the persistent gradients shrink from whole to the rank's shard, and the peak drops by
    # exactly as much (no layer's whole gradient waits for its reduce-scatter at the peak)
    assert a["peak_memory_bytes"] - b["peak_memory_bytes"] == whole - shard


def stage_tensors(dp: int, zero: int) -> dict:
    """The tensors of gpt2_small's single stage with its states on the host."""
    from sst_cdma.model.fitted import kernel_model_for
    from workloads import load_network
    from workloads.model_states import Placement
    from workloads.parallel import ModelShape, make_layout
    from workloads.parallel.transformer_stages import tied_head, transformer_stage_stream
    from workloads.render import iteration_stream

    plan = iteration_stream("gpt2_small", 1, "float16", "none", optimizer="adam",
                            kernel_model=kernel_model_for("hopper"), seq_len=128,
                            placement=Placement("host")).plan
    shape = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
    lay = make_layout(shape, pp=1, dp=dp, zero=zero, micro_batches=1, micro_batch_size=1)
    net = load_network("gpt2_small", 128)
    return transformer_stage_stream(plan, lay, 0, "t", tied_head(net, "none"), None, "adam",
                                    Placement("host")).stream.tensors
