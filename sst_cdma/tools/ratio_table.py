"""``python -m sst_cdma.tools.ratio_table --write|--check``: regenerate the sampled codecs'
ratio table (``sst_cdma/model/ratio_table.json``, :func:`sst_cdma.model.compression.write_table`)
or compare every entry with a fresh sample
(:func:`sst_cdma.model.compression.table_differences`)."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from sst_cdma.model import compression

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``--write`` regenerates ratio_table.json; ``--check`` compares it with fresh samples
    (exit status 1 where an entry differs or the table is missing)."""
    ap = argparse.ArgumentParser(prog="python -m sst_cdma.tools.ratio_table",
                                 description="the table of the sampled codecs' ratios (RLE, "
                                             "zlib, ...) on the density grid")
    action = ap.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="regenerate the table")
    action.add_argument("--check", action="store_true", help="recompute and compare every entry")
    args = ap.parse_args(argv)
    if args.write:
        print(f"wrote {compression.write_table()}")
        return 0
    found = compression.table_differences()
    if found is None:
        print(f"{compression.TABLE_PATH}: missing or made for other sampling settings")
        return 1
    lines, compared = found
    for line in lines:
        print(line)
    print(f"{len(lines)} of {compared} entries differ")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
