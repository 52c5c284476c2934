"""Running a regression suite: every case is one simulation (inline, or on Dask with several
workers), its values are compared with ``reference/<case>.json``, or with ``update`` written
there."""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from ..sweep.dispatch import Dispatcher
from ..sweep.execute import PointTask, point_dir
from ..sweep.keys import inputs_digest, key_of, script_digest
from ..sweep.marks import SpecError
from ..sweep.table import run_values
from .compare import Difference, compare_case, select_values
from .suite import Case, Suite, load_suite

REFERENCE_VERSION = 1


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
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(f"not a reference file: {exc}", path) from None
    if not isinstance(data, dict) or not isinstance(data.get("values"), dict):
        raise SpecError("not a reference file (no 'values' mapping)", path)
    return data["values"]


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
            shutil.rmtree(case_dir)
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
        outcomes = [_judge(suite, case, records[case.name], tasks[case.name], update)
                    for case in cases]
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return SuiteOutcome(suite=suite, cases=outcomes)


def _judge(suite: Suite, case: Case, record: dict[str, Any], task: PointTask,
           update: bool) -> CaseOutcome:
    if record.get("status") != "ok":
        error = record.get("error") or "failed"
        return CaseOutcome(case, "error", [Difference(case.name, "(run)", "ok",
                                                      f"failed: {error}", "")], error)
    got = run_values(record, point_dir(task.points_dir, task.key), case.selectors)
    path = suite.reference_path(case)
    if update:
        text = reference_text(case, select_values(case, got))
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return CaseOutcome(case, "unchanged")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return CaseOutcome(case, "updated")
    reference = read_reference(path)
    if reference is None:
        return CaseOutcome(case, "missing", [Difference(case.name, "(reference)",
                                                        "(no reference file)", "", "")])
    diffs = compare_case(case, reference, got)
    return CaseOutcome(case, "failed" if diffs else "passed", diffs)


__all__ = ["run_suite", "SuiteOutcome", "CaseOutcome", "read_reference", "reference_text"]
