"""Rendered workload streams: they parse, follow the vDNN policy rules, and account memory."""
from __future__ import annotations

import functools
import os

import pytest

from network_tiers import tiered
from workloads import (NETWORK_DIR, NETWORKS, POLICIES, WorkloadError, load_network,
                                parse_stream, render_stream, stream_stats)
from workloads.loader import network_path
from workloads.render import iteration_stream, stream_text

GB = 1e9


@functools.lru_cache(maxsize=None)
def rendered(name: str, policy: str, batch: int = 16, dtype: str = "float32"):
    text = render_stream(name, batch, dtype, policy=policy)
    return text, parse_stream(text, source=f"{name}-{policy}.stream")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", tiered(NETWORKS))
@pytest.mark.every_network("name")
def test_every_network_and_policy_renders_a_valid_stream(name, policy):
    text, stream = rendered(name, policy)
    assert text.splitlines()[3] == f"stream version=1 network={name} batch=16 dtype=float32 policy={policy}"
    assert (stream.network, stream.batch, stream.dtype, stream.policy) == (name, 16, "float32", policy)
    stats = stream_stats(stream)
    assert stats.leaked == ()
    net = load_network(name)
    infos = net.infer(16)
    computed = [i.name for i in infos if i.kind != "data"]
    assert stream.layers("fwd") == computed
    assert stream.layers("bwd") == computed[::-1]
    for i in infos[1:]:
        st = stats.layers[i.name]
        assert (st.flops_fwd, st.flops_bwd, st.dram_fwd, st.dram_bwd) == (
            i.flops_fwd, i.flops_bwd, i.dram_fwd, i.dram_bwd)
    # every compute op is followed by the sync of its layer
    ops = stream.ops
    for k, op in enumerate(ops):
        if op.op == "compute":
            assert ops[k + 1].op == "sync" and ops[k + 1].name == op.name
    # only a tensor some backward kernel reads is offloaded, and every one comes back
    needed = {t for i in infos for t in i.bwd_needs}
    assert set(stats.offloaded) <= needed
    assert set(stats.prefetched) == set(stats.offloaded)
    assert len(stats.offloaded) == len(set(stats.offloaded))


def test_rendering_is_deterministic_and_diffable():
    a = render_stream("googlenet", 8, policy="conv")
    b = render_stream("googlenet", 8, policy="conv")
    assert a == b
    assert all(len(line) < 400 for line in a.splitlines())


def _conv_inputs(name: str) -> set[str]:
    return {t for i in load_network(name).infer(1) if i.kind == "conv" for t in i.inputs}


def _layer_inputs_read_backward(name: str) -> set[str]:
    infos = load_network(name).infer(1)
    needed = {t for i in infos for t in i.bwd_needs}
    return {t for i in infos if not i.in_place for t in i.inputs} & needed


@pytest.mark.parametrize("name", tiered(NETWORKS))
def test_conv_policy_offloads_exactly_the_conv_inputs(name):
    _, stream = rendered(name, "conv")
    offloads = [op for op in stream.ops if op.op == "offload"]
    assert {op.name for op in offloads} == _conv_inputs(name)
    net = load_network(name)
    kinds = {layer.name: layer.kind for layer in net.layers}
    tensors = net.tensors(1)
    for op in offloads:
        assert kinds[op.layer] == "conv"
        assert op.layer in tensors[op.name].consumers
        # offloaded during the FIRST conv that reads it
        first = min((c for c in tensors[op.name].consumers if kinds[c] == "conv"), key=net.index)
        assert op.layer == first


@pytest.mark.parametrize("name", tiered(NETWORKS))
def test_all_policy_offloads_every_layer_input_a_backward_kernel_reads_and_none_nothing(name):
    _, stream = rendered(name, "all")
    assert {op.name for op in stream.ops if op.op == "offload"} == \
        _layer_inputs_read_backward(name)
    _, resident = rendered(name, "none")
    assert not [op for op in resident.ops if op.op in ("offload", "prefetch", "wait")]


@pytest.mark.parametrize("policy", ["all", "conv"])
@pytest.mark.parametrize("name", tiered(NETWORKS))
def test_forward_offload_overlaps_compute_and_frees_after_last_reader(name, policy):
    _, stream = rendered(name, policy)
    fwd = stream.phase_ops("forward")
    net = load_network(name)
    tensors = net.tensors(1)
    for k, op in enumerate(fwd):
        if op.op != "offload":
            continue
        # issued before the compute of its layer, in the same layer block
        nxt = next(o for o in fwd[k:] if o.op == "compute")
        assert nxt.name == op.layer and op.name in nxt.reads
        last = max(tensors[op.name].consumers, key=net.index)
        last_compute = next(j for j, o in enumerate(fwd) if o.op == "compute" and o.name == last)
        free = next(j for j, o in enumerate(fwd) if o.op == "free" and o.name == op.name)
        assert free > last_compute
        assert fwd[free - 1].op in ("sync", "free")


SHIPPED = sorted(p.stem for p in NETWORK_DIR.glob("*.yaml") if not p.stem.startswith("_"))


def test_the_shipped_networks():
    assert set(NETWORKS) | {"digits_cnn"} == set(SHIPPED)


@pytest.mark.parametrize("policy", ["all", "conv"])
@pytest.mark.parametrize("name", tiered(SHIPPED))
def test_every_offloaded_tensor_is_prefetched(name, policy):
    _, stream = rendered(name, policy)
    offloads = [op.name for op in stream.ops if op.op == "offload"]
    prefetches = [op.name for op in stream.ops if op.op == "prefetch"]
    has_conv = any(layer.kind == "conv" for layer in load_network(name).layers)
    # policy conv offloads the inputs of convolutions: a transformer has none
    assert bool(offloads) == (policy == "all" or has_conv)
    assert sorted(offloads) == sorted(prefetches)
    assert len(set(offloads)) == len(offloads)


def test_resnet50_all_frees_what_no_backward_kernel_reads_instead_of_offloading_it():
    _, stream = rendered("resnet50", "all")
    offloads = {op.name for op in stream.ops if op.op == "offload"}
    assert len(offloads) == 105
    assert len([op for op in stream.ops if op.op == "prefetch"]) == 105
    net = load_network("resnet50")
    blocks = [layer.name.split("/")[0] for layer in net.layers
              if layer.name.endswith("/bn_branch2c")]
    assert len(blocks) == 16
    # each block's last batchnorm and each projection shortcut's batchnorm feed only the add,
    # and fc1000 only the loss: none of their backward kernels reads these outputs
    dropped = ({f"{b}/bn_branch2c" for b in blocks}
               | {f"{b}/bn_branch1" for b in ("res2a", "res3a", "res4a", "res5a")}
               | {"fc1000"})
    assert len(dropped) == 21 and not dropped & offloads
    tensors = net.tensors(1)
    fwd = stream.phase_ops("forward")
    for name in dropped:
        assert net.layer(tensors[name].consumers[-1]).kind in ("add", "loss")
        # freed in the forward pass, right after its last reader's layer-boundary sync
        last = max(tensors[name].consumers, key=net.index)
        free = next(k for k, op in enumerate(fwd) if op.op == "free" and op.name == name)
        sync = next(k for k, op in enumerate(fwd) if op.op == "sync" and op.name == last)
        assert sync < free and all(op.op == "free" for op in fwd[sync + 1:free])
        assert not [op for op in stream.phase_ops("backward")
                    if (op.op != "compute" and op.op != "sync" and op.name == name)
                    or name in op.reads]


@pytest.mark.parametrize("policy", ["all", "conv"])
@pytest.mark.parametrize("name", tiered(NETWORKS))
def test_prefetch_never_reaches_past_the_next_conv(name, policy):
    _, stream = rendered(name, policy)
    net = load_network(name)
    kinds = {layer.name: layer.kind for layer in net.layers}
    bwd = stream.phase_ops("backward")
    for k, op in enumerate(bwd):
        if op.op != "prefetch":
            continue
        here = net.index(op.layer)
        # the first backward kernel that reads the tensor
        user = next(o for o in bwd[k:] if o.op == "compute" and op.name in o.reads)
        there = net.index(user.name)
        assert there <= here
        between = [layer.name for layer in net.layers[there + 1:here]]
        assert not [b for b in between if kinds[b] == "conv"], (op, user.name)
        if there == here:  # on-demand: the kernel waits for it
            assert any(o.op == "wait" and o.name == op.name for o in bwd[k:]
                       if o.line < user.line)


def test_vgg16_conv_policy_schedule_matches_vdnn():
    _, stream = rendered("vgg16", "conv")
    pre = [(op.name, op.layer) for op in stream.ops if op.op == "prefetch"]
    # the input of the last conv is fetched while the classifier layers run
    assert pre[0] == ("conv5_2", "loss")
    # each conv's backward prefetches the input of the conv before it
    assert ("conv5_1", "conv5_3") in pre and ("pool4", "conv5_2") in pre
    assert ("data", "conv1_2") in pre
    assert not [op for op in stream.ops if op.op == "wait"]  # no on-demand stalls


def test_peak_memory_ordering_and_the_vdnn_28gb_figure():
    peaks = {}
    for policy in POLICIES:
        stats = stream_stats(parse_stream(render_stream("vgg16", 256, policy=policy)))
        peaks[policy] = stats
    none, conv, all_ = (peaks[p].peak_bytes for p in ("none", "conv", "all"))
    assert none > conv >= all_
    s = peaks["none"]
    # everything resident: at the end of forward all activations plus weights and their grads
    assert s.resident_after_forward == s.activation_bytes + 2 * s.weight_bytes
    assert s.activation_bytes == pytest.approx(15.60 * GB, rel=0.01)
    assert s.weight_bytes == 138_357_544 * 4
    # vDNN quotes ~28 GB; freeing gradient maps as soon as they are consumed gives 16.9 GB,
    # a network-wide allocation of every declared buffer 32.2 GB (docs/workloads.md)
    assert s.peak_bytes == pytest.approx(16.88 * GB, rel=0.01)
    assert s.declared_bytes == pytest.approx(32.16 * GB, rel=0.01)
    assert peaks["conv"].resident_after_forward < s.resident_after_forward / 2
    assert peaks["all"].resident_after_forward < 2 * s.weight_bytes + 0.1 * GB
    assert peaks["all"].offloaded_bytes > peaks["conv"].offloaded_bytes > 0


def test_fp16_halves_the_bytes():
    a = stream_stats(rendered("alexnet", "conv")[1])
    b = stream_stats(rendered("alexnet", "conv", 16, "float16")[1])
    assert b.peak_bytes * 2 == a.peak_bytes
    assert b.offloaded_bytes * 2 == a.offloaded_bytes
    assert b.flops_fwd == a.flops_fwd


def test_sparse_flags_reach_the_stream():
    _, stream = rendered("vgg16", "conv")
    assert stream.tensors["conv1_1"].sparse and stream.tensors["pool1"].sparse
    assert not stream.tensors["data"].sparse
    assert stream.tensors["conv1_1"].shape == (16, 64, 224, 224)
    assert stream.tensors["conv1_1:grad"].kind == "gradient"
    assert stream.tensors["conv1_1:w"].kind == "weight"
    stats = stream_stats(stream)
    assert 0 < stats.sparse_offloaded_bytes < stats.offloaded_bytes  # the image is dense


def test_measured_times_become_time_keys():
    text = render_stream("alexnet", 4, policy="all",
                         times={"conv1": {"fwd": 1_250_000_000, "bwd": 2_500_000_000}})
    assert "compute conv1 pass=fwd" in text and "time=1.25ms" in text
    stream = parse_stream(text)
    fwd = next(op for op in stream.computes("fwd") if op.name == "conv1")
    bwd = next(op for op in stream.computes("bwd") if op.name == "conv1")
    assert fwd.time_ps == 1_250_000_000 and bwd.time_ps == 2_500_000_000
    assert stream_stats(stream).layers["conv1"].time_fwd_ps == 1_250_000_000
    with pytest.raises(WorkloadError, match="unknown layer"):
        render_stream("alexnet", 4, times={"conv9": {"fwd": 10**9}})


def test_render_rejects_bad_requests():
    with pytest.raises(WorkloadError, match="policy"):
        render_stream("alexnet", 4, policy="some")
    with pytest.raises(WorkloadError, match="dtype"):
        render_stream("alexnet", 4, dtype="float64")
    with pytest.raises(WorkloadError, match="batch"):
        render_stream("alexnet", -1)


def test_command_line(tmp_path, capsys):
    from sst_cdma.tools.workloads import main

    out = tmp_path / "alexnet.stream"
    assert main(["render", "alexnet", "--batch", "8", "--policy", "all", "-o", str(out)]) == 0
    assert main(["stats", str(out)]) == 0
    assert "alexnet batch 8 float32 policy all" in capsys.readouterr().out
    out.write_text(out.read_text().replace("phase backward", "phase sideways"))
    assert main(["stats", str(out)]) == 1
    assert "unknown phase 'sideways'" in capsys.readouterr().err
    assert main(["list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    from workloads.loader import CAPTURE_NETWORKS, NETWORKS

    assert listed == list(NETWORKS + CAPTURE_NETWORKS) and "digits_cnn" in listed


def test_iteration_stream_is_rendered_once_and_again_after_an_edit(tmp_path):
    stream = iteration_stream("alexnet", 8, "float32", "all")
    assert stream_text(stream) == render_stream("alexnet", 8, "float32", policy="all")
    assert iteration_stream("alexnet", 8, "float32", "all") is stream      # memoized
    assert iteration_stream("alexnet", 8, "float32", "conv") is not stream  # other policy
    mine = tmp_path / "mine.yaml"
    mine.write_text(network_path("alexnet").read_text())
    first = iteration_stream(mine, 8, "float32", "all")
    assert [op.op for op in first.ops] == [op.op for op in stream.ops]
    edited = mine.read_text().replace("num_output: 4096", "num_output: 2048")
    mine.write_text(edited)
    st = os.stat(mine)
    os.utime(mine, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a later modification time
    second = iteration_stream(mine, 8, "float32", "all")
    assert second is not first
    assert second.tensors["fc6"].bytes == first.tensors["fc6"].bytes // 2


def test_command_line_names_a_stream_that_is_not_utf8(tmp_path, capsys):
    from sst_cdma.tools.workloads import main

    path = tmp_path / "x.stream"
    path.write_bytes(b"stream version=1 network=\xff\n")
    assert main(["stats", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {path}: not UTF-8 text (byte 0xff at offset 25)\n"


@pytest.mark.parametrize("allocation,placement", [
    ("liveness", None), ("network-wide", None),
    ("liveness", {"optimizer_states": "host", "gradients": "host", "weights": "host"}),
    ("liveness", {"grad_accum": 2})])
def test_a_rendered_streams_text_lays_out_its_plan(allocation, placement):
    """The template writes each phase's blocks as their comment and their ops' lines, the
    tensors, the prologue and the epilogue as their lines, in order, and nothing between."""
    from workloads.model_states import Placement
    from workloads.render import render_plan
    from workloads.stream_schema import statement_line
    from workloads.vdnn import plan_iteration

    plan = plan_iteration(load_network("alexnet"), 8, "float32", "conv", None, "adam", 1 << 20,
                          None, allocation, None,
                          Placement(**placement) if placement else None)
    text = render_plan(plan)

    def lines(items):
        return "".join(statement_line(x) + "\n" for x in items)

    def blocks(bs):
        return "".join(f"# -- {b.comment}\n" + lines(b.ops) for b in bs)
    assert "".join(lines(plan.tensors)) + "\nphase forward\n" in text
    assert lines(plan.prologue) + blocks(plan.forward) + "\nphase backward\n" + \
        blocks(plan.backward) in text
    assert text.endswith("# release what lives for the whole iteration\n" +
                         lines(plan.epilogue) + "end\n")
    host_step = placement is not None and "optimizer_states" in placement
    assert (blocks(plan.update) in text) and bool(plan.update) != host_step
