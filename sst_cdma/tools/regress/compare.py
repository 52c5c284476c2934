"""Comparing a case's values with its reference: which keys, within which tolerance, and the
table of differences."""
from __future__ import annotations

import difflib
import fnmatch
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from sst_cdma.tools.sweep.spec import DEFAULT_EXCLUDE
from sst_cdma.tools.regress.suite import Case, applies, is_glob

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


def expand(entry: str, pool: Iterable[str]) -> list[str]:
    """The keys of ``pool`` a glob compare entry takes, sorted (per-layer timelines only when
    the glob names ``layers``; statistics never: they are named explicitly)."""
    detail = "layers" not in entry   # per-layer timelines only when asked for by name
    return sorted(k for k in pool if fnmatch.fnmatchcase(k, entry) and not k.startswith("stat.")
                  and not (detail and any(fnmatch.fnmatchcase(k, p) for p in DEFAULT_EXCLUDE)))


def compared_keys(case: Case, got: Mapping[str, Any],
                  reference: Optional[Mapping[str, Any]] = None) -> list[str]:
    """The keys a case compares: its compare entries, globs expanded over the keys obtained and
    the reference's keys (sorted within each glob; per-layer timelines only with a glob that
    names ``layers``)."""
    pool = set(got) | set(reference or {})
    keys: dict[str, None] = {}
    for entry in case.compare:
        for key in (expand(entry, pool) if is_glob(entry) else [entry]):
            keys.setdefault(key, None)
    return list(keys)


def _present(key: str, values: Mapping[str, Any]) -> bool:
    """Whether ``values`` (a run's, or a reference's) has ``key``: a statistic selector that
    matched no statistic is there as None."""
    return key in values and not (key.startswith("stat.") and values[key] is None)


def unmatched_entries(case: Case, got: Mapping[str, Any],
                      reference: Optional[Mapping[str, Any]] = None) -> list[str]:
    """The case's compare entries that match nothing in the run (nor in ``reference`` when
    given): a key it does not have, a glob matching none of its keys, a statistic selector that
    matched no statistic."""
    sides = [got] if reference is None else [got, reference]
    out = []
    for entry in dict.fromkeys(case.compare):
        if is_glob(entry):
            if not any(expand(entry, side) for side in sides):
                out.append(entry)
        elif not any(_present(entry, side) for side in sides):
            out.append(entry)
    return out


def entry_kind(entry: str) -> str:
    """How an error names a compare entry: ``statistic selector``, ``glob`` or ``key``."""
    return "statistic selector" if entry.startswith("stat.") else \
        "glob" if is_glob(entry) else "key"


def unused_tolerances(patterns: Iterable[str], keys: Iterable[str]) -> list[str]:
    """The tolerance patterns that apply to none of ``keys``."""
    keys = list(keys)
    return [p for p in patterns if not any(applies(p, k) for k in keys)]


def close_hint(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when a candidate is close to ``word``, else empty."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=2)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def select_values(case: Case, got: Mapping[str, Any]) -> dict[str, Any]:
    """The values of a run that the case compares (what ``--update`` writes; a statistic that
    matched nothing is left out: :func:`unmatched_entries` refuses it first)."""
    return {key: got.get(key) for key in compared_keys(case, got) if _present(key, got)}


def compare_case(case: Case, reference: Mapping[str, Any],
                 got: Mapping[str, Any]) -> list[Difference]:
    """Every compared key whose value differs beyond its tolerance, or is missing on a side."""
    diffs = []
    for key in compared_keys(case, got, reference):
        tol = case.tolerance(key)
        if key not in reference:
            diffs.append(Difference(case.name, key, MISSING, show(got.get(key, MISSING)),
                                    str(tol)))
        elif not _present(key, got) or got[key] is None and reference[key] is not None:
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
           "show", "MISSING", "expand", "unmatched_entries", "unused_tolerances", "entry_kind",
           "close_hint"]
