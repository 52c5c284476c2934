"""The tables of docs/storage.md: VGG-16's offloads to host memory and to NVMe drives on the P100
system, and Llama-7B's model states on the drives (ZeRO-Infinity) on the H100 PCIe system.

    python sweeps/storage_tiers.py [--only vgg16|llama_7b] [--list]

Every row is one in-process run of a topology script (``sst TOPOLOGY -- OPTIONS``, printed with
``--list``), each once, a second or two each. VGG-16: the iteration and the share of it the GPU
stalled; Llama-7B: the step, the forward and backward passes, and the host CPU's optimizer step
(in brackets: the same step alone on an idle host).
"""
from __future__ import annotations

import argparse
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst_cdma import run  # noqa: E402
from sst_cdma.engine.runner import RunError  # noqa: E402


@dataclass(frozen=True)
class Table:
    """One table: the topology script, the options every row shares, each row's own options,
    the header and the cells a row's summary gives."""

    name: str
    script: str
    common: tuple[str, ...]
    rows: tuple[str, ...]
    header: tuple[str, ...]
    cells: Callable[[dict[str, Any]], list[str]]

    def command(self, row: str) -> str:
        """The ``sst`` command line of ``row``."""
        return f"sst {self.script} -- {' '.join(self.common)} {row}"


def vgg_cells(summary: dict[str, Any]) -> list[str]:
    """The iteration in ms and the share of it the GPU stalled."""
    step = summary["iteration_time_s"]
    return [f"{step * 1e3:.1f} ms", f"{summary['stall_time_s'] / step:.1%}"]


def zero_cells(summary: dict[str, Any]) -> list[str]:
    """The step, the passes and the CPU's optimizer step (alone on an idle host), in s."""
    states = summary["model_states"]
    return [f"{summary['iteration_time_s']:.3f} s",
            f"{summary['forward_time_s'] + summary['backward_time_s']:.3f} s",
            f"{states['cpu_step_time_s']:.3f} s ({states['cpu_step_alone_s']:.3f} s)"]


_MICRON = "--nvme-preset micron9550"
TABLES = (
    Table("vgg16", "topologies/pascal_cdma.py",
          ("--network", "vgg16", "--batch", "64", "--policy", "all", "--no-baselines"),
          ("--offload-to host", "--offload-to host --algorithm none",
           "--nvme 1 --offload-to nvme", "--nvme 1 --offload-to nvme --algorithm none",
           f"--nvme 1 --offload-to nvme {_MICRON}", "--nvme 2 --offload-to nvme",
           "--nvme 2 --offload-to nvme --nvme-path gds", "--nvme 4 --offload-to nvme",
           "--nvme 4 --offload-to nvme --algorithm none"),
          ("OPTIONS", "iteration", "stalled"), vgg_cells),
    Table("llama_7b", "topologies/hopper_pcie5_cdma.py",
          ("--network", "llama_7b", "--batch", "1", "--seq-len", "1024", "--dtype", "bfloat16",
           "--optimizer", "adam", "--no-baselines"),
          ("--optimizer-states host", f"--optimizer-states nvme --nvme 1 {_MICRON}",
           f"--optimizer-states nvme --nvme 4 {_MICRON}",
           f"--optimizer-states nvme --weights nvme --nvme 1 {_MICRON}",
           f"--optimizer-states nvme --weights nvme --nvme 4 {_MICRON}"),
          ("OPTIONS", "step", "forward + backward", "CPU step (alone)"), zero_cells),
)


def simulate(table: Table, row: str) -> dict[str, Any]:
    """The summary of ``row``'s run (a refused run ends the script with its reason)."""
    result = run(REPO / table.script, [*table.common, *row.split()], console=io.StringIO(),
                 record_statistics=False)
    summary: dict[str, Any] = result.reports["summary"]
    return summary


def print_table(table: Table) -> None:
    """Run every row of ``table`` once and print it as markdown."""
    print(f"| {' | '.join(table.header)} |\n|{'---|' * len(table.header)}")
    for row in table.rows:
        print(f"| `{row}` | {' | '.join(table.cells(simulate(table, row)))} |", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the tables (or, with ``--list``, every row's command)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=[t.name for t in TABLES],
                    help="this table only")
    ap.add_argument("--list", action="store_true", help="print every row's command, run none")
    args = ap.parse_args(argv)
    selected = [t for t in TABLES if args.only in (None, t.name)]
    try:
        for number, table in enumerate(selected):
            if args.list:
                print("\n".join(table.command(row) for row in table.rows))
                continue
            print("\n" if number else "", end="")
            print_table(table)
    except RunError as exc:
        print(f"storage_tiers.py: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
