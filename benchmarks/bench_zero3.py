"""ZeRO 0-3 on a pipeline with data parallelism, simulated: the step, each stage's exposed and
hidden data-parallel time and its peak memory, one row per ``--zero`` (docs/parallel.md,
"ZeRO-3 and the overlap").

    python benchmarks/bench_zero3.py [--markdown]

Each row is ``sst topologies/pipeline_cdma.py -- --network gpt2_small --gpu hopper --pp 2
--dp 2 --zero Z --micro-batches 4 --batch 1 --seq-len 512``, its figures read from the run's
summary (simulated time: the same on any machine).
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.text_tables import print_table  # noqa: E402
from sst_cdma import run  # noqa: E402

COMMAND = ("--network gpt2_small --gpu hopper --pp 2 --dp 2 --zero {zero} --micro-batches 4 "
           "--batch 1 --seq-len 512")


def pipeline(zero: int) -> dict[str, Any]:
    """The run's ``pipeline`` summary at ZeRO ``zero``."""
    result = run(str(REPO / "topologies/pipeline_cdma.py"), COMMAND.format(zero=zero),
                 console=io.StringIO())
    return result.reports["summary"]["pipeline"]


def row(zero: int) -> list[str]:
    """One row: the step, each stage's exposed / hidden DP time, the stages' peaks."""
    p = pipeline(zero)
    ms = [f"{s['dp_comm_time_s'] * 1e3:.3f} / {s['dp_hidden_time_s'] * 1e3:.3f} ms"
          for s in p["stages"]]
    peaks = " / ".join(f"{s['peak_memory_bytes'] / 2**20:.1f}" for s in p["stages"])
    return [str(zero), f"{p['step_time_s'] * 1e3:.3f} ms", *ms, f"{peaks} MiB"]


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="a markdown table")
    args = parser.parse_args()
    head = ["`--zero`", "step", "stage 0: exposed / hidden DP", "stage 1: exposed / hidden DP",
            "peak stage 0 / 1"]
    print_table(head, ["---"] * len(head), [row(z) for z in range(4)], args.markdown)


if __name__ == "__main__":
    main()
