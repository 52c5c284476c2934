"""What ``sst-cdma time-cpu-adam`` records of the measuring CPU: its vector extensions and
clock from ``/proc/cpuinfo``, and the optimizer each implementation ran."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from sst_cdma.tools.capture.cpu_adam_timing import cpu_features, optimizer_names  # noqa: E402

XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2599.998
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16
processor\t: 1
cpu MHz\t\t: 1200.000
flags\t\t: fpu sse4_2
"""
ZEN2 = "model name\t: AMD EPYC 7742 64-Core Processor\ncpu MHz\t\t: 2250.000\n" \
       "flags\t\t: fpu sse4_2 avx avx2 fma\n"
GRACE = "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve sve2 bf16\n"


@pytest.mark.parametrize("text, simd, mhz", [
    (XEON, ["avx512f", "avx2"], 2599.998),   # the first CPU's, widest first
    (ZEN2, ["avx2"], 2250.0),
    (GRACE, ["sve", "asimd"], None),         # Arm: Features, and no clock line
    ("", [], None),
    ("cpu MHz : fast\nflags : avx2\n", ["avx2"], None),
])
def test_the_vector_extensions_and_clock_come_from_cpuinfo(text, simd, mhz):
    assert cpu_features(text) == (simd, mhz)


def test_each_implementation_names_its_optimizer():
    assert optimizer_names(["fused", "deepspeed"]) == {
        "fused": "torch.optim.AdamW(fused=True)",
        "deepspeed": "deepspeed.ops.adam.DeepSpeedCPUAdam(adamw_mode=True)"}
