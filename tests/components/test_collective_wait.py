"""Asynchronous collectives (``async=1``) and the ``collective_wait`` op: the kernels after an
asynchronous collective run beside it, the wait stalls only for what is left of it, the
port runs one collective at a time over a group, and the stream checker refuses a tensor
used while its collective is in flight. docs/parallel.md, "Asynchronous collectives"."""
from __future__ import annotations

import pytest
from test_cluster_fabric import priced_ps, run_cluster

from components.collective_ops import CollectiveOpsResult
from components.gpu import GPU
from sst_cdma.model.cluster_graph import build_cluster
from workloads.errors import StreamError
from workloads.stream import parse_stream

#: bytes of the gradient reduced over dp
GRAD = 512 << 20
FIRST_PS = 20_000_000


def dp_stream(after_ps: int, blocking: bool = False, second: bool = False) -> str:
    """A kernel, then an all-reduce of ``dw`` over dp (asynchronous unless ``blocking``), a
    kernel of ``after_ps`` beside it, and the wait; with ``second`` another asynchronous
    all-reduce of ``dx`` issued right after the first."""
    start = "" if blocking else " async=1"
    lines = ["stream version=1 network=dp batch=1 dtype=float16 policy=none",
             f"tensor dw bytes={GRAD} kind=gradient layer=k0",
             f"tensor dx bytes={GRAD} kind=gradient layer=k0",
             "phase forward", "alloc dw", "alloc dx",
             f"compute k0 pass=fwd flops=0 dram=0 time={FIRST_PS}ps", "sync k0",
             f"all_reduce dw group=dp{start}"]
    if second:
        lines.append("all_reduce dx group=dp async=1")
    lines += ["phase backward", f"compute k1 pass=bwd flops=0 dram=0 time={after_ps}ps",
              "sync k1"]
    if not blocking:
        lines.append("collective_wait dw")
    if second:
        lines.append("collective_wait dx")
    return "\n".join(lines + ["free dw", "free dx", "end", ""])


def run_dp(tmp_path, write_script, text: str):
    """Two ranks of one dp group on one DGX H100: the run, rank 0's port record and the
    priced all-reduce."""
    result = run_cluster(tmp_path, write_script, [text] * 2, tp=1,
                         fabric_params=', "dp": 2')
    port = result.results["gpu0:collectives[0]"]
    assert isinstance(port, CollectiveOpsResult)
    cost = priced_ps(build_cluster("dgx_h100", 1), (0, 1), "ring", "all_reduce", GRAD)
    return result, port, cost


def kernel_span(result, name: str) -> tuple[int, int]:
    """When rank 0's kernel ``name`` started and ended."""
    [(start, end)] = [(a, b) for kind, label, a, b in result.results["gpu0"].timeline
                      if kind == "compute" and label.split()[0] == name]
    return start, end


def test_kernels_run_beside_an_asynchronous_collective_and_the_wait_stalls_for_the_rest(
        tmp_path, write_script):
    _, _, cost = run_dp(tmp_path, write_script, dp_stream(1))
    assert cost > 1_000_000  # half a GiB over NVLink: hundreds of microseconds
    short = cost // 3
    result, port, _ = run_dp(tmp_path, write_script, dp_stream(short))
    [(op, group, seq, tensor, nbytes, start, end)] = port.collectives
    assert (op, group, seq, tensor, nbytes) == ("all_reduce", "dp", 0, "dw", GRAD)
    assert (start, end - start) == (FIRST_PS, cost)
    # the next kernel starts with the collective, not after it
    k1 = kernel_span(result, "k1")
    assert k1 == (FIRST_PS, FIRST_PS + short)
    # the wait stalls for what is left: the collective's end less the kernel's
    assert port.waited == {"dp": end - k1[1]} and port.wait_ps == cost - short
    assert result.results["gpu0"].iteration_time_ps == FIRST_PS + cost


def test_a_kernel_longer_than_the_collective_hides_it(tmp_path, write_script):
    _, _, cost = run_dp(tmp_path, write_script, dp_stream(1))
    result, port, _ = run_dp(tmp_path, write_script, dp_stream(2 * cost))
    assert port.waited == {"dp": 0} and port.wait_ps == 0
    assert result.results["gpu0"].iteration_time_ps == FIRST_PS + 2 * cost


def test_the_blocking_form_runs_the_kernel_after_it(tmp_path, write_script):
    result, port, cost = run_dp(tmp_path, write_script, dp_stream(1000, blocking=True))
    assert kernel_span(result, "k1")[0] == FIRST_PS + cost
    assert port.waited == {"dp": cost} and port.wait_ps == cost
    assert result.results["gpu0"].iteration_time_ps == FIRST_PS + cost + 1000


def test_collectives_over_one_group_run_one_at_a_time(tmp_path, write_script):
    result, port, cost = run_dp(tmp_path, write_script, dp_stream(1000, second=True))
    first, second = port.collectives
    assert (first[3], second[3]) == ("dw", "dx")
    assert first[5:] == (FIRST_PS, FIRST_PS + cost)
    assert second[5:] == (FIRST_PS + cost, FIRST_PS + 2 * cost)
    fabric = result.results["fabric"].collectives
    assert [(r.seq, r.last_ps, r.end_ps) for r in fabric] == \
        [(0, FIRST_PS, FIRST_PS + cost), (1, FIRST_PS + cost, FIRST_PS + 2 * cost)]
    assert port.waited == {"dp": 2 * cost - 1000}


def test_collective_wait_is_a_registered_op_issued_by_its_module(monkeypatch):
    import components.collective_wait as module

    calls = []
    monkeypatch.setattr(module, "issue_collective_wait",
                        lambda gpu, op: calls.append((gpu, op)) or False)
    assert GPU.OP_HANDLERS["collective_wait"]("gpu", "op") is False
    assert calls == [("gpu", "op")]


@pytest.mark.parametrize("body, message", [
    (["all_reduce dw group=dp async=1", "compute k1 pass=fwd flops=0 dram=0 time=1ps "
      "reads=dw"], "'compute k1' reads tensor 'dw' while its asynchronous all_reduce is in "
                   "flight (missing collective_wait)"),
    (["all_reduce dw group=dp", "collective_wait dw"],
     "'collective_wait': tensor 'dw' has no asynchronous collective (async=1) in flight"),
    (["all_reduce dw group=dp async=1", "free dw"], "'free': tensor 'dw' while its "
                                                    "all_reduce may be in flight"),
    (["all_reduce dw group=dp async=1", "sync k0", "all_gather dw group=dp"],
     "'all_gather': tensor 'dw' while its all_reduce may be in flight"),
    (["all_reduce dw group=dp async=2"], "async=2 must be 0 or 1"),
])
def test_the_stream_refuses_a_tensor_used_while_its_collective_is_in_flight(body, message):
    text = "\n".join(["stream version=1 network=dp batch=1 dtype=float16 policy=none",
                      "tensor dw bytes=64 kind=gradient layer=k0", "phase forward",
                      "alloc dw", "compute k0 pass=fwd flops=0 dram=0 time=1ps", *body,
                      "phase backward", "end", ""])
    with pytest.raises(StreamError) as info:
        parse_stream(text, "s")
    assert message in str(info.value) and "\n" not in str(info.value)
