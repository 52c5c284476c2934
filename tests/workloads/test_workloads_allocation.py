"""GPU memory allocation modes of the rendered stream: ``liveness`` (a buffer from its birth to its
death, the default: vDNN's layer-wise memory manager) and ``network-wide`` (vDNN's baseline:
every buffer for the whole iteration where the policy moves no tensor; a policy that offloads
is vDNN's memory manager, so it keeps the liveness schedule)."""
from __future__ import annotations

import pytest

from workloads import NETWORKS, WorkloadError, load_network, parse_stream, stream_stats
from sst_cdma.tools.workloads import main as workloads_main
from workloads.render import iteration_stream, render_stream, stream_text
from workloads.vdnn import ALLOCATIONS, plan_iteration

GB = 1e9


def _stream(network, batch, policy, allocation, **kw):
    text = render_stream(network, batch, "float32", policy, allocation=allocation, **kw)
    return parse_stream(text, f"{network}-{policy}-{allocation}")


def _first_compute(stream):
    return next(k for k, op in enumerate(stream.ops) if op.op == "compute")


def _last_compute(stream):
    return max(k for k, op in enumerate(stream.ops) if op.op == "compute")


def test_the_modes_and_the_default():
    assert ALLOCATIONS == ("liveness", "network-wide")
    net = load_network("alexnet")
    assert plan_iteration(net, 4).allocation == "liveness"
    assert render_stream("alexnet", 4) == render_stream("alexnet", 4, allocation="liveness")
    assert "network-wide" not in render_stream("alexnet", 4)
    assert "# network-wide allocation" in render_stream("alexnet", 4, policy="none",
                                                        allocation="network-wide")
    assert plan_iteration(net, 4, policy="none", allocation="network-wide").allocation == \
        "network-wide"
    # a policy that offloads is vDNN's layer-wise memory manager (Rhu et al. 2016, section III)
    assert plan_iteration(net, 4, allocation="network-wide").allocation == "liveness"


def test_an_unknown_allocation_is_a_workload_error():
    with pytest.raises(WorkloadError, match="unknown allocation 'bogus' .*liveness, "
                                            "network-wide"):
        plan_iteration(load_network("alexnet"), 4, allocation="bogus")


@pytest.mark.parametrize("network", list(NETWORKS))
@pytest.mark.every_network
def test_network_wide_needs_at_least_what_liveness_needs(network):
    for policy in ("none", "conv", "all"):
        live = stream_stats(_stream(network, 8, policy, "liveness"))
        wide = stream_stats(_stream(network, 8, policy, "network-wide"))
        assert wide.leaked == () and live.leaked == ()
        assert wide.peak_bytes >= live.peak_bytes, policy
        assert wide.declared_bytes == live.declared_bytes
        # the same transfers and kernels: only alloc and free differ
        assert (wide.offloaded, wide.prefetched, wide.flops_fwd, wide.flops_bwd, wide.dram_fwd,
                wide.dram_bwd) == (live.offloaded, live.prefetched, live.flops_fwd,
                                   live.flops_bwd, live.dram_fwd, live.dram_bwd)
        if policy == "none":
            # nothing offloaded: every declared buffer is live at once, before the first kernel
            assert wide.peak_bytes == wide.declared_bytes
            assert wide.resident_after_forward == wide.declared_bytes


def test_network_wide_allocates_every_buffer_once():
    live = _stream("googlenet", 4, "none", "liveness", optimizer="adam", workspace=1 << 20)
    wide = _stream("googlenet", 4, "none", "network-wide", optimizer="adam", workspace=1 << 20)
    first, last = _first_compute(wide), _last_compute(wide)
    for name in wide.tensors:
        allocs = [k for k, op in enumerate(wide.ops) if op.op == "alloc" and op.name == name]
        frees = [k for k, op in enumerate(wide.ops) if op.op == "free" and op.name == name]
        # one allocation before the forward pass, one release after the last phase
        assert len(allocs) == 1 and allocs[0] < first, name
        assert len(frees) == 1 and frees[0] > last, name
    assert any(t.kind == "workspace" for t in wide.tensors.values())
    assert any(t.kind == "state" for t in wide.tensors.values())

    # apart from alloc/free, the two streams issue the same ops in the same order
    def issued(stream):
        return [(op.op, op.name, op.pass_) for op in stream.ops if op.op not in ("alloc", "free")]

    assert issued(wide) == issued(live)


@pytest.mark.parametrize("policy", ["conv", "all", "recompute"])
def test_a_policy_that_moves_tensors_allocates_layer_wise_under_network_wide(policy):
    """vDNN's policies run on its layer-wise memory manager (Rhu et al. 2016, section III); only
    its baseline allocates network-wide. So one network-wide run pairs vDNN's two: the run's
    stream is the liveness stream, its oracle's (policy none) the network-wide one."""
    live = render_stream("googlenet", 4, "float32", policy, optimizer="adam",
                         workspace=1 << 20)
    wide = render_stream("googlenet", 4, "float32", policy, optimizer="adam",
                         workspace=1 << 20, allocation="network-wide")
    assert wide == live


def test_a_policy_that_selects_nothing_is_the_baseline():
    # no convolution in a transformer: vDNN-conv moves nothing, so it allocates network-wide
    wide = stream_stats(_stream("gpt2_small", 1, "conv", "network-wide"))
    assert wide.offloaded == ()
    assert wide.peak_bytes == wide.declared_bytes


def test_a_network_wide_workspace_is_allocated_once_for_the_iteration():
    live = _stream("alexnet", 4, "none", "liveness", workspace=1 << 20)
    wide = _stream("alexnet", 4, "none", "network-wide", workspace=1 << 20)
    convs = [name for name, t in wide.tensors.items() if t.kind == "workspace"]
    assert len(convs) == 5
    for name in convs:
        # liveness: around each of the layer's two kernels; network-wide: once
        assert sum(op.op == "alloc" and op.name == name for op in live.ops) == 2
        assert sum(op.op == "alloc" and op.name == name for op in wide.ops) == 1


def test_vgg16_network_wide_without_offload_is_near_the_vdnn_papers_28_gb():
    """vDNN (Rhu et al., MICRO 2016) quotes about 28 GB for VGG-16 at batch 256 under its
    network-wide baseline allocation. Ours holds every feature map (15.60 GB, ReLUs in place),
    gradient map (15.45 GB), weight and weight gradient (0.55 GB each) at once: 32.16 GB, 15%
    above the paper, whose framework's exact buffers we do not reproduce. The 20-40 GB window
    is loose on purpose but still catches a lost or double-counted class of buffers: without
    the gradient maps the total would be 16.7 GB, with out-of-place ReLU outputs 46 GB."""
    wide = stream_stats(_stream("vgg16", 256, "none", "network-wide"))
    live = stream_stats(_stream("vgg16", 256, "none", "liveness"))
    assert wide.peak_bytes == wide.declared_bytes == 32_160_364_864
    assert 20 * GB <= wide.peak_bytes <= 40 * GB
    assert live.peak_bytes == 16_880_589_120
    conv = stream_stats(_stream("vgg16", 256, "conv", "network-wide"))
    assert conv.peak_bytes == stream_stats(_stream("vgg16", 256, "conv", "liveness")).peak_bytes


def test_the_memo_key_includes_the_allocation():
    live = iteration_stream("alexnet", 4, "float32", "none")
    wide = iteration_stream("alexnet", 4, "float32", "none", allocation="network-wide")
    assert stream_text(live) != stream_text(wide)
    assert stream_stats(wide).peak_bytes > stream_stats(live).peak_bytes
    assert iteration_stream("alexnet", 4, "float32", "none", allocation="network-wide") is wide


def test_the_render_command_takes_the_allocation(tmp_path, capsys):
    out = tmp_path / "wide.stream"
    assert workloads_main(["render", "alexnet", "--batch", "4", "--policy", "none",
                           "--allocation", "network-wide", "-o", str(out)]) == 0
    stats = stream_stats(parse_stream(out.read_text(), str(out)))
    assert stats.peak_bytes == stats.declared_bytes


def test_the_mean_over_kernels_weighs_every_kernel_the_same(tmp_path, capsys):
    wide = _stream("alexnet", 4, "none", "network-wide")
    assert stream_stats(wide).kernel_mean_bytes == stream_stats(wide).declared_bytes
    live = _stream("alexnet", 4, "all", "liveness")
    sizes = {name: t.bytes for name, t in live.tensors.items()}
    held, seen = 0, []
    for op in live.ops:
        held += sizes[op.name] if op.op == "alloc" else -sizes[op.name] if op.op == "free" else 0
        if op.op == "compute":
            seen.append(held)
    stats = stream_stats(live)
    assert stats.kernel_mean_bytes == round(sum(seen) / len(seen))
    assert stats.weight_bytes < stats.kernel_mean_bytes < stats.peak_bytes
    out = tmp_path / "all.stream"
    out.write_text(stream_text(live))
    assert workloads_main(["stats", str(out)]) == 0
    assert f"mean over kernels {stats.kernel_mean_bytes / 1e9:.3f} GB" in capsys.readouterr().out
