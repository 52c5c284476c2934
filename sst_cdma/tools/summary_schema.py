"""``python -m sst_cdma.tools.summary_schema [--json-schema]``: print ``summary.json``'s tables
as the README holds them (:func:`components.summary_schema.markdown`), or rewrite the shipped
JSON Schema (:func:`components.summary_schema.write_json_schema`)."""
from __future__ import annotations

import argparse
from typing import Optional

from components.summary_schema import JSON_SCHEMA_PATH, markdown, write_json_schema

__all__ = ["main"]


def main(argv: Optional[list[str]] = None) -> int:
    """Print the README's tables, or with ``--json-schema`` rewrite the shipped JSON Schema."""
    parser = argparse.ArgumentParser(prog="python -m sst_cdma.tools.summary_schema",
                                     description="Print summary.json's tables (markdown, as "
                                                 "the README holds them).")
    parser.add_argument("--json-schema", action="store_true",
                        help=f"rewrite {JSON_SCHEMA_PATH.name} (the shipped JSON Schema) instead")
    args = parser.parse_args(argv)
    if args.json_schema:
        print(f"wrote {write_json_schema()}")
    else:
        print(markdown(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
