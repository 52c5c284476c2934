"""Comparing a case's values with its reference: which keys, within which tolerance, and the
table of differences."""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..sweep.spec import DEFAULT_EXCLUDE
from .suite import Case

MISSING = "(missing)"


@dataclass(frozen=True)
class Difference:
    """One mismatch: the case, the key, the reference and obtained values, the tolerance."""

    case: str
    key: str
    reference: str
    got: str
    tolerance: str


def show(value: Any) -> str:
    """A value as printed in the difference table."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    return json.dumps(value)


def compared_keys(case: Case, got: Mapping[str, Any],
                  reference: Optional[Mapping[str, Any]] = None) -> list[str]:
    """The keys a case compares: its compare entries, globs expanded over the keys obtained and
    the reference's keys (sorted within each glob; per-layer timelines only with a glob that
    names ``layers``)."""
    pool = set(got) | set(reference or {})
    keys: dict[str, None] = {}
    for entry in case.compare:
        if any(ch in entry for ch in "*?[") and not entry.startswith("stat."):
            detail = "layers" not in entry   # per-layer timelines only when asked for by name
            for key in sorted(k for k in pool if fnmatch.fnmatchcase(k, entry)
                              and not k.startswith("stat.")
                              and not (detail and any(fnmatch.fnmatchcase(k, p)
                                                      for p in DEFAULT_EXCLUDE))):
                keys.setdefault(key, None)
        else:
            keys.setdefault(entry, None)
    return list(keys)


def select_values(case: Case, got: Mapping[str, Any]) -> dict[str, Any]:
    """The values of a run that the case compares (what ``--update`` writes)."""
    return {key: got.get(key) for key in compared_keys(case, got) if key in got}


def compare_case(case: Case, reference: Mapping[str, Any],
                 got: Mapping[str, Any]) -> list[Difference]:
    """Every compared key whose value differs beyond its tolerance, or is missing on a side."""
    diffs = []
    for key in compared_keys(case, got, reference):
        tol = case.tolerance(key)
        if key not in reference:
            diffs.append(Difference(case.name, key, MISSING, show(got.get(key, MISSING)),
                                    str(tol)))
        elif key not in got or got[key] is None and reference[key] is not None:
            diffs.append(Difference(case.name, key, show(reference[key]), MISSING, str(tol)))
        elif not tol.allows(reference[key], got[key]):
            diffs.append(Difference(case.name, key, show(reference[key]), show(got[key]),
                                    str(tol)))
    return diffs


def format_table(diffs: list[Difference]) -> str:
    """The differences as an aligned text table (case, key, reference, got, tolerance)."""
    head = ("case", "key", "reference", "got", "tolerance")
    rows = [head] + [(d.case, d.key, d.reference, d.got, d.tolerance) for d in diffs]
    widths = [min(max(len(r[i]) for r in rows), 60) for i in range(len(head))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


__all__ = ["Difference", "compare_case", "compared_keys", "select_values", "format_table",
           "show", "MISSING"]
