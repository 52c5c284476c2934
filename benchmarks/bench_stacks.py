"""A transformer training step per training stack (``--stack``): the simulated iteration of
GPT-2 small and Llama-7B on an H100 SXM (``hopper``) and an A100 (``ampere``), bf16, fused
attention, nothing offloaded (docs/kernel_model.md, "Stacks").

    python benchmarks/bench_stacks.py [--markdown]

Each run is ``sst topologies/hopper_pcie5_cdma.py -- --gpu GPU --network NET --batch B
--seq-len S --dtype bfloat16 --attention fused --policy none --no-baselines --stack STACK``,
in process; the figure is the simulated iteration in milliseconds.
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sst_cdma import run  # noqa: E402
from sst_cdma.model.stacks import STACKS  # noqa: E402
from text_tables import print_table  # noqa: E402

TOPOLOGY = REPO / "topologies/hopper_pcie5_cdma.py"
#: (network, micro-batch, sequence length) of each row
CASES = (("gpt2_small", 8, 1024), ("llama_7b", 1, 2048))
#: the GPU presets of the columns
GPUS = ("hopper", "ampere")


def step_ms(gpu: str, network: str, batch: int, seq: int, stack: str) -> float:
    """The simulated iteration in milliseconds of one configuration."""
    r = run(TOPOLOGY, ["--gpu", gpu, "--network", network, "--batch", str(batch),
                       "--seq-len", str(seq), "--dtype", "bfloat16", "--attention", "fused",
                       "--policy", "none", "--no-baselines", "--stack", stack],
            console=io.StringIO(), record_statistics=False)
    return r.sim_time_ps / 1e9


def table() -> list[list[str]]:
    """The rows: network, GPU, then the step per stack and eager over megatron."""
    rows = []
    for network, batch, seq in CASES:
        for gpu in GPUS:
            ms = {s: step_ms(gpu, network, batch, seq, s) for s in STACKS}
            rows.append([f"{network} (batch {batch}, seq {seq})", gpu,
                         *(f"{ms[s]:.2f}" for s in STACKS),
                         f"{ms['eager'] / ms['megatron']:.3f}"])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table (``--markdown``: as docs/kernel_model.md shows it)."""
    p = argparse.ArgumentParser(prog="python benchmarks/bench_stacks.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--markdown", action="store_true", help="a markdown table")
    args = p.parse_args(argv)
    head = ["network", "GPU", *(f"{s} (ms)" for s in STACKS), "eager / megatron"]
    print_table(head, ["---"] * 2 + ["---:"] * (len(head) - 2), table(), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
