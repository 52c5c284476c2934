"""What a sweep point keeps of its trace: the GPU memory counters (what the report's memory
plot needs), not every kernel and copy, unless the spec asks for full traces."""
from __future__ import annotations

import json

import pytest

from sst_cdma.tools.sweep.driver import point_tasks
from sst_cdma.tools.sweep.execute import run_point
from sst_cdma.tools.sweep.spec import SpecError, load_spec


def _spec(tmp_path, repo, extra=""):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "s.yaml"
    path.write_text(f"topology: {repo / 'topologies/pascal_cdma.py'}\n"
                    "options: {network: alexnet, batch: 8, no-baselines: true}\n"
                    f"grid: {{policy: [all]}}\n{extra}", encoding="utf-8")
    return load_spec(path)


def _trace(tmp_path, repo, extra=""):
    spec = _spec(tmp_path, repo, extra)
    (point, task), = point_tasks(spec, tmp_path / "points")
    assert run_point(task)["status"] == "ok"
    trace = json.loads((tmp_path / "points" / task.key / "trace.json").read_text())
    return task.key, [e["ph"] for e in trace["traceEvents"]]


def test_a_point_keeps_the_memory_counters_and_a_full_trace_only_when_asked(tmp_path, repo):
    key, kinds = _trace(tmp_path / "a", repo)
    assert "C" in kinds and "X" not in kinds
    full_key, full = _trace(tmp_path / "b", repo, "full_trace: true\n")
    assert "C" in full and "X" in full
    assert full_key != key  # a cached short trace does not stand in for a full one


def test_full_trace_must_be_a_boolean(tmp_path, repo):
    with pytest.raises(SpecError, match="full_trace must be true or false, got 'yes please'"):
        _spec(tmp_path, repo, "full_trace: yes please\n")
