"""``summary.json`` carries ``schema_version``, and its JSON Schema, generated from
``components/summary_schema.py``, is shipped as generated and validates real summaries (a fresh
run's and every golden case's) while refusing broken ones."""
from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import jsonschema
import pytest

from components.summary_schema import (JSON_SCHEMA_PATH, SCHEMA_VERSION, check_summary,
                                       json_schema, json_schema_text)
from sst_cdma.engine.runner import run

REPO = Path(__file__).resolve().parents[2]
GOLDEN = sorted((REPO / "tests" / "data" / "golden").glob("*/summary.json"))


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(JSON_SCHEMA_PATH.read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    run(REPO / "topologies" / "pascal_cdma.py", "--network alexnet --batch 16",
        output_directory=out, console=io.StringIO())
    return json.loads((out / "summary.json").read_text("utf-8"))


def test_the_shipped_schema_is_the_generated_one():
    assert JSON_SCHEMA_PATH.read_text("utf-8") == json_schema_text(), \
        "regenerate it: python -m sst_cdma.tools.summary_schema --json-schema"


def test_the_tool_prints_the_tables_and_rewrites_the_schema(monkeypatch, tmp_path, capsys):
    import components.summary_schema as schema
    from sst_cdma.tools.summary_schema import main

    assert main([]) == 0
    assert capsys.readouterr().out == schema.markdown()
    target = tmp_path / "summary.schema.json"
    monkeypatch.setattr(schema, "JSON_SCHEMA_PATH", target)
    assert main(["--json-schema"]) == 0
    assert target.read_text("utf-8") == json_schema_text()
    assert capsys.readouterr().out == f"wrote {target}\n"


def test_a_summary_carries_its_schema_version(summary):
    assert summary["schema_version"] == SCHEMA_VERSION == 2
    assert json_schema()["properties"]["schema_version"]["type"] == "integer"


def test_a_real_summary_validates(validator, summary):
    assert list(validator.iter_errors(summary)) == [] and check_summary(summary) == []


@pytest.mark.parametrize("path", GOLDEN, ids=[p.parent.name for p in GOLDEN])
def test_every_golden_summary_validates(validator, path):
    """Several GPUs, data parallel, the planner, a workload stream: every shape a summary
    takes (the golden copies were blessed before the version existed: it is added)."""
    data = json.loads(path.read_text("utf-8"))
    data.setdefault("schema_version", SCHEMA_VERSION)
    assert [e.message for e in validator.iter_errors(data)] == []


@pytest.mark.parametrize("break_it, where", [
    (lambda s: s.pop("schema_version"), "'schema_version' is a required property"),
    (lambda s: s.update(batch=64.5), "is not of type 'integer'"),
    (lambda s: s.update(fits_in_memory=1), "is not of type 'boolean'"),
    (lambda s: s.update(surprise=1), "'surprise' was unexpected"),
    (lambda s: s["layers"][0].pop("end_ps"), "'end_ps' is a required property"),
    (lambda s: s["baselines"]["oracle"].update(policy=None), "is not of type 'string'"),
])
def test_the_schema_refuses_what_check_summary_refuses(validator, summary, break_it, where):
    broken = copy.deepcopy(summary)
    break_it(broken)
    messages = [e.message for e in validator.iter_errors(broken)]
    assert any(where in m for m in messages), messages
    assert check_summary(broken) != []


def test_sweep_tables_and_regress_globs_leave_the_version_out(summary):
    """The version describes the file, not the run: no constant column, no figure to compare."""
    from sst_cdma.tools.sweep.spec import DEFAULT_EXCLUDE
    from sst_cdma.tools.sweep.table import flatten

    row = flatten(summary, exclude=DEFAULT_EXCLUDE)
    assert "schema_version" not in row and "iteration_time_s" in row
