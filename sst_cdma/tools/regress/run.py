"""Running a regression suite: every case is one simulation (inline, or on Dask with several
workers), its values are compared with ``reference/<case>.json``, or with ``update`` written
there."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from sst_cdma.engine.file_safety import remove_tree
from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json, read_text
from sst_cdma.tools.sweep.dispatch import Dispatcher
from sst_cdma.tools.sweep.execute import PointTask, point_dir
from sst_cdma.tools.sweep.keys import inputs_digest, key_of, script_digest
from sst_cdma.tools.sweep.marks import SpecError, display_path
from sst_cdma.tools.sweep.table import run_values
from sst_cdma.tools.regress.compare import (Difference, close_hint, compare_case, compared_keys, entry_kind,
                      select_values, unmatched_entries, unused_tolerances)
from sst_cdma.tools.regress.suite import Case, Suite, load_suite

REFERENCE_VERSION = 1
#: one case's reference values: a few hundred keys
REFERENCE_FILE = FileKind("a reference file", 16 * MIB)
RERUN = "reference made with other {what}: run --update"   # a stale reference's row
_NOTHING = "; no reference was updated"   # what --update's refusals add


@dataclass
class CaseOutcome:
    """How one case went: ``passed``, ``failed`` (differences), ``error`` (the run failed),
    ``missing`` (no reference), ``updated`` / ``unchanged`` (with update)."""

    case: Case
    status: str
    differences: list[Difference] = field(default_factory=list)
    error: str = ""


@dataclass
class SuiteOutcome:
    """A suite run: each case's outcome, in suite order."""

    suite: Suite
    cases: list[CaseOutcome]

    @property
    def ok(self) -> bool:
        """True when every case passed (or was updated)."""
        return all(c.status in ("passed", "updated", "unchanged") for c in self.cases)

    @property
    def differences(self) -> list[Difference]:
        """All differences, case by case."""
        return [d for c in self.cases for d in c.differences]


def read_reference(path: Path) -> Optional[dict[str, Any]]:
    """The reference values in ``path``, or None when it does not exist. SpecError when it is
    not a reference file."""
    data = read_reference_file(path)
    return None if data is None else data["values"]


def read_reference_file(path: Path) -> Optional[dict[str, Any]]:
    """The whole reference file ``path`` (case, topology, model_options, params, values), or
    None when it does not exist. SpecError when it is not a reference file."""
    try:
        data = load_json(path, REFERENCE_FILE, finite=False)  # values as a run gave them
    except FileReadError as exc:
        if exc.missing:
            return None
        raise SpecError(f"not a reference file: {exc}", path) from None
    if not isinstance(data, dict) or not isinstance(data.get("values"), dict):
        raise SpecError("not a reference file (no 'values' mapping)", path)
    return data


def _option_groups(argv: Any) -> Optional[list[tuple[str, ...]]]:
    """An argument list as its options (``--name`` and the values after it), sorted: the order
    options are written in is not part of a case. None when not a list of strings."""
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    groups: list[list[str]] = []
    for arg in argv:
        if arg.startswith("--") or not groups:
            groups.append([arg])
        else:
            groups[-1].append(arg)
    return sorted(tuple(g) for g in groups)


def _same_script(folder: Path, written: Any, case: Case) -> bool:
    if not isinstance(written, str):
        return False
    if written == case.point.topology_name:
        return True
    return (folder / written).resolve() == Path(case.point.topology).resolve()


def made_otherwise(suite: Suite, case: Case, data: dict[str, Any]) -> list[Difference]:
    """One difference per thing the reference was made with that the case no longer has: its
    topology, model options (in any order) or param overrides. A reference file without the
    record (written by hand) is not checked for it."""
    diffs = []
    if "topology" in data and not _same_script(suite.folder.resolve(), data["topology"], case):
        diffs.append(Difference(case.name, "(topology)", str(data["topology"]),
                                case.point.topology_name, RERUN.format(what="topology")))
    options = case.point.model_options(as_written=True)
    if "model_options" in data and \
            _option_groups(data["model_options"]) != _option_groups(options):
        ref = data["model_options"]
        diffs.append(Difference(case.name, "(options)",
                                " ".join(map(str, ref)) if isinstance(ref, list) else str(ref),
                                " ".join(options) or "(none)", RERUN.format(what="options")))
    if "params" in data and data["params"] != case.point.overrides():
        diffs.append(Difference(case.name, "(params)", json.dumps(data["params"], sort_keys=True),
                                json.dumps(case.point.overrides(), sort_keys=True),
                                RERUN.format(what="params")))
    return diffs


def reference_text(case: Case, values: dict[str, Any]) -> str:
    """The reference file of a case (stable JSON: sorted keys, two-space indent)."""
    data = {"case": case.name, "format": REFERENCE_VERSION,
            "topology": case.point.topology_name,
            "model_options": case.point.model_options(as_written=True),
            "params": case.point.overrides(), "values": values}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def run_suite(folder: Union[str, Path], update: bool = False, workers: int = 1,
              names: Sequence[str] = (), keep: Optional[Union[str, Path]] = None
              ) -> SuiteOutcome:
    """Run the suite in ``folder`` (all cases, or those in ``names``); compare with the
    references, or rewrite them with ``update``. ``workers`` > 1 runs cases on a local Dask
    cluster; ``keep`` keeps the runs' outputs in that folder (one per case)."""
    suite = load_suite(folder)
    cases = suite.cases
    if names:
        known = {c.name for c in cases}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SpecError(f"no case named {unknown[0]!r} (cases: {', '.join(sorted(known))})",
                            suite.file)
        cases = [c for c in cases if c.name in names]
    scratch = Path(tempfile.mkdtemp(prefix="sst-cdma-regress-")) if keep is None else \
        Path(keep).resolve()
    runs = scratch / "runs"
    inputs = inputs_digest()
    tasks: dict[str, PointTask] = {}
    for case in cases:
        point = case.point
        key = key_of(point, script_digest(point.topology), inputs)
        case_dir = runs / case.name
        if case_dir.exists():
            remove_tree(case_dir)
        tasks[case.name] = PointTask(key=key, script=str(point.topology),
                                     topology_name=point.topology_name,
                                     model_options=tuple(point.model_options()),
                                     overrides=point.overrides(), points_dir=str(case_dir))
    records: dict[str, dict[str, Any]] = {}
    try:
        with Dispatcher(workers=workers, inline=workers <= 1) as dispatcher:
            by_dir = {t.points_dir: name for name, t in tasks.items()}
            for task, record in dispatcher.run(tasks.values()):
                records[by_dir[task.points_dir]] = record
        judged = [_judge(suite, case, records[case.name], tasks[case.name], update)
                  for case in cases]
    finally:
        if keep is None:
            remove_tree(scratch)
    if len(cases) == len(suite.cases) and all(j.keys is not None for j in judged):
        compared = {key for j in judged for key in (j.keys or ())}
        for pattern in unused_tolerances(suite.tolerance_lines, compared):
            raise SpecError(f"tolerance {pattern!r} applies to no key any case compares"
                            f"{close_hint(pattern, compared)}{_NOTHING if update else ''}",
                            suite.file, suite.tolerance_lines[pattern])
    for j in judged:   # only once every case passed its checks: all or nothing
        if j.write is not None:
            path, text = j.write
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return SuiteOutcome(suite=suite, cases=[j.outcome for j in judged])



@dataclass
class _Judged:
    """A case's outcome, the keys it compared (None when it did not get that far) and, with
    update, the reference file to write."""

    outcome: CaseOutcome
    keys: Optional[list[str]] = None
    write: Optional[tuple[Path, str]] = None


def _check_entries(suite: Suite, case: Case, got: dict[str, Any],
                   reference: Optional[dict[str, Any]], update: bool) -> list[str]:
    """The keys the case compares; SpecError (the suite file, the line of the entry at fault)
    for a compare entry that matches nothing in the run (nor in the reference), or a tolerance
    of the case that applies to no compared key."""
    for entry in unmatched_entries(case, got, reference):
        where = "the run" if update else \
            f"the run or its reference {display_path(suite.reference_path(case))}"
        what = "no statistic of" if entry.startswith("stat.") else "nothing in"
        hint = "" if entry.startswith("stat.") else \
            close_hint(entry, [k for k in got if not k.startswith("stat.")])
        raise SpecError(f"case {case.name}: compare {entry_kind(entry)} {entry!r} matches "
                        f"{what} {where}{hint}{_NOTHING if update else ''}", suite.file,
                        case.compare_lines.get(entry, case.line))
    keys = compared_keys(case, got, reference)
    for pattern in unused_tolerances(case.tolerance_lines, keys):
        raise SpecError(f"case {case.name}: tolerance {pattern!r} applies to no compared key"
                        f"{close_hint(pattern, keys)}{_NOTHING if update else ''}", suite.file,
                        case.tolerance_lines[pattern])
    return keys


def _same_text(path: Path, text: str) -> bool:
    """Whether the file ``path`` holds ``text`` (False when it is missing or unreadable: the
    update then writes it)."""
    try:
        return read_text(path, REFERENCE_FILE) == text
    except FileReadError:
        return False


def _judge(suite: Suite, case: Case, record: dict[str, Any], task: PointTask,
           update: bool) -> _Judged:
    if record.get("status") != "ok":
        error = record.get("error") or "failed"
        return _Judged(CaseOutcome(case, "error", [Difference(case.name, "(run)", "ok",
                                                              f"failed: {error}", "")], error))
    got = run_values(record, point_dir(task.points_dir, task.key), case.selectors)
    path = suite.reference_path(case)
    if update:
        keys = _check_entries(suite, case, got, None, update)
        text = reference_text(case, select_values(case, got))
        if _same_text(path, text):
            return _Judged(CaseOutcome(case, "unchanged"), keys)
        return _Judged(CaseOutcome(case, "updated"), keys, (path, text))
    data = read_reference_file(path)
    if data is None:
        return _Judged(CaseOutcome(case, "missing", [Difference(
            case.name, "(reference)", "(no reference file)", "", "")]))
    stale = made_otherwise(suite, case, data)
    if stale:   # the values of another simulation: comparing them would mean nothing
        return _Judged(CaseOutcome(case, "failed", stale))
    reference = data["values"]
    keys = _check_entries(suite, case, got, reference, update)
    diffs = compare_case(case, reference, got)
    return _Judged(CaseOutcome(case, "failed" if diffs else "passed", diffs), keys)


__all__ = ["run_suite", "SuiteOutcome", "CaseOutcome", "read_reference", "read_reference_file",
           "reference_text", "made_otherwise"]
