"""``python -m sst_cdma.tools.tensor_parallel --table``: one tensor-parallel rank's saved
activations per block beside Korthikanti et al. (2022), the tables docs/tensor_parallel.md
shows (:func:`workloads.parallel.tensor.comparison_tables`)."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from workloads.parallel.tensor import comparison_tables

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sst_cdma.tools.tensor_parallel --table``: print :func:`comparison_tables`."""
    parser = argparse.ArgumentParser(
        prog="python -m sst_cdma.tools.tensor_parallel",
        description="Tensor and sequence parallelism: one rank's saved activations per block "
                    "beside Korthikanti et al. (2022), as docs/tensor_parallel.md shows them.")
    parser.add_argument("--table", action="store_true", required=True,
                        help="print the comparison tables (markdown)")
    parser.parse_args(argv)
    sys.stdout.write(comparison_tables())
    return 0


if __name__ == "__main__":
    sys.exit(main())
