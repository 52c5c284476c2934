"""``python -m sst_cdma.tools.zero_table``: per-rank model-state memory under ZeRO's stages and
each stage's traffic per step (:mod:`workloads.parallel.zero`), the tables docs/zero.md shows."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from workloads.dtypes import DTYPES
from workloads.errors import WorkloadError
from workloads.vdnn import OPTIMIZERS
from workloads.parallel.zero import (ZERO_STAGES, model_state_table, step_volume_bytes)

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sst_cdma.tools.zero_table``: a table of per-rank model-state memory under
    ZeRO's stages and each stage's volume per step, for a parameter count or a network."""
    p = argparse.ArgumentParser(prog="python -m sst_cdma.tools.zero_table",
                                description="ZeRO model-state bytes and traffic per rank.")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--params", type=int, default=7_500_000_000,
                      help="parameters (default: the ZeRO paper's 7.5B example)")
    what.add_argument("--network", help="a shipped network or a .yaml definition")
    p.add_argument("--dp", type=int, nargs="+", default=[1, 4, 16, 64, 256, 1024])
    p.add_argument("--dtype", choices=list(DTYPES), default="float16")
    p.add_argument("--optimizer", choices=[o for o in OPTIMIZERS if o != "none"],
                   default="adam")
    args = p.parse_args(argv)
    try:
        params = args.params
        if args.network:
            from workloads.loader import load_network
            params = load_network(args.network).param_count()
        table = model_state_table(params, args.dp, args.dtype, args.optimizer)
        volumes = ", ".join(f"stage {s}: {step_volume_bytes(params, s, args.dtype) / 1e9:.2f}"
                            for s in ZERO_STAGES)
    except WorkloadError as exc:
        print(f"python -m sst_cdma.tools.zero_table: error: {exc}", file=sys.stderr)
        return 2
    print(f"Model-state GB per rank, {params:,} parameters, {args.dtype}, {args.optimizer}:\n")
    print(table)
    print(f"\nGB moved per rank per step: {volumes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
