"""The planner tests' toy costs: each kernel on a roofline of a small GPU, and each tensor's
copy over a 12 GB/s link, plain or through a 30 GB/s codec of ratio 3."""
from __future__ import annotations

from components.kernel_times import roofline_ps
from components.messages import CopyCost


def kernel_ps(op):
    """A kernel's time on a 10 TFLOP/s, 500 GB/s roofline with a 5 us launch."""
    return roofline_ps(op.flops or 0, op.dram or 0, 10e12, 0.6, 500e9, 5_000_000)


def copy_costs(net, batch, link=12e9, codec=30e9, ratio=3.0, latency=1_000_000):
    """Each of ``net``'s tensors' copy costs at ``batch`` in float32, plain and packed."""
    out = {}
    for name, t in net.tensors(batch, "float32").items():
        plain = latency + int(t.bytes / link * 1e12)
        packed = latency + int(max(t.bytes / codec, t.bytes / ratio / link) * 1e12)
        out[name] = CopyCost(plain, plain, packed, packed, int(t.bytes / ratio))
    return out
