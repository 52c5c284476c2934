"""The table of docs/workloads.md, "Where a codec pays": Llama-7B's step with its model-state
copies plain, compressed by the cDMA engine or by the host CPU, on an H100 PCIe and on a V100
over NVLink 2 and over PCIe 3, with the immediate and the delayed update.

    python sweeps/state_compression.py [--list]

Every cell is one in-process run of a topology script (``sst TOPOLOGY -- OPTIONS``, printed
with ``--list``), each about a second: the step in s and, for ``engine`` and ``host``, against
``none``; the gradient bytes the link carries to the host, raw and as the codec leaves them.
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst_cdma import run  # noqa: E402
from sst_cdma.engine.runner import RunError  # noqa: E402

COMMON = ("--network llama_7b --batch 1 --seq-len 1024 --dtype bfloat16 --optimizer adam "
          "--optimizer-states host --algorithm bplane_zstd --no-baselines")
#: (the row's system as the table names it, the topology script, its own options)
SYSTEMS = (("H100 PCIe, PCIe 5 x16", "topologies/hopper_pcie5_cdma.py", ""),
           ("V100, NVLink 2 x3", "topologies/pascal_cdma.py", "--gpu volta"),
           ("V100, PCIe 3 x16", "topologies/pascal_cdma.py", "--gpu volta --link pcie3x16"))
UPDATES = (("immediate", ""), ("delayed", "--delayed-update"))
MODES = ("none", "engine", "host")
HEADER = ("system", "update", "`none`", "`engine`", "`host`", "link bytes out (raw / coded)")


def command(script: str, options: str) -> str:
    """The ``sst`` command line of one cell."""
    return f"sst {script} -- {' '.join(filter(None, (options, COMMON)))}"


def cells() -> list[tuple[str, str, str]]:
    """(row label, script, options) of every cell, row by row, ``none`` first in each."""
    out = []
    for system, script, own in SYSTEMS:
        for update, flag in UPDATES:
            for mode in MODES:
                options = " ".join(filter(None, (own, f"--state-compression {mode}", flag)))
                out.append((f"{system}|{update}", script, options))
    return out


def summary_of(script: str, options: str) -> dict[str, Any]:
    """The summary of one run."""
    result = run(REPO / script, [*options.split(), *COMMON.split()], console=io.StringIO())
    return result.reports["summary"]


def row(label: str, summaries: Sequence[dict[str, Any]]) -> list[str]:
    """The cells of one row from its ``none``, ``engine`` and ``host`` summaries."""
    system, update = label.split("|")
    base = summaries[0]["iteration_time_s"]
    out = [system, update, f"{base:.3f}"]
    for s in summaries[1:]:
        step = s["iteration_time_s"]
        out.append(f"{step:.3f} ({(step / base - 1) * 100:+.1f}%)")
    states = summaries[1]["model_states"]
    out.append(f"{states['gradients_to_host_bytes'] / 1e9:.2f} / "
               f"{states['gradients_wire_bytes'] / 1e9:.2f} GB")
    return out


def table() -> str:
    """The markdown table, as the page shows it."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    runs = cells()
    for start in range(0, len(runs), len(MODES)):
        group = runs[start:start + len(MODES)]
        summaries = [summary_of(script, options) for _, script, options in group]
        lines.append("| " + " | ".join(row(group[0][0], summaries)) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table (or, with ``--list``, the command of every cell)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each cell's command")
    args = parser.parse_args(argv)
    if args.list:
        for _, script, options in cells():
            print(command(script, options))
        return 0
    try:
        print(table())
    except RunError as exc:
        print(f"state_compression.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
