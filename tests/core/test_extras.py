"""The base install runs a topology; each command of an extra that is not installed says, in
one line, which extra to install; ``[test]`` pulls every extra the suite needs."""
from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from sst_cdma.tools import extras
from sst_cdma.tools.cli.sst_cdma_main import main

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
#: distribution -> the module it installs, where the names differ
MODULE_OF = {"dask[distributed]": "distributed", "scikit-learn": "sklearn", "pyyaml": "yaml"}


def _names(requirements: list[str]) -> set[str]:
    return {MODULE_OF.get(re.split(r"[<>=!;\s]", r, maxsplit=1)[0],
                          re.split(r"[<>=!\[;\s]", r, maxsplit=1)[0]) for r in requirements}


def test_the_base_install_holds_none_of_the_sweep_report_calibrate_or_capture_modules():
    base = _names(PROJECT["dependencies"])
    for extra, modules in extras.EXTRAS.items():
        assert not base & set(modules), extra
        # dask comes with dask[distributed]
        assert set(modules) - {"dask"} <= _names(PROJECT["optional-dependencies"][extra]), extra


def test_the_test_extra_pulls_every_extra_but_capture():
    test = PROJECT["optional-dependencies"]["test"]
    assert "sst-cdma[sweep,report,calibrate]" in test
    assert {"pytest", "jsonschema"} <= _names(test)


def _without(monkeypatch, *absent: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in absent else real(name, *a))


@pytest.mark.parametrize("argv, absent, words", [
    (["sweep", "spec.yaml"], ("dask",), "sweep needs dask, which is not installed: "
                                        "pip install 'sst-cdma[sweep]'"),
    (["report", "results"], ("matplotlib",), "report needs matplotlib, which is not "
                                             "installed: pip install 'sst-cdma[report]'"),
    (["calibrate"], ("scipy",), "calibrate needs scipy, which is not installed: "
                                "pip install 'sst-cdma[calibrate]'"),
    (["capture", "--help"], ("torch",), "capture needs torch, which is not installed: "
                                        "pip install 'sst-cdma[capture]'"),
    (["regress", "--workers", "2"], ("dask", "distributed"),
     "regress --workers needs dask, distributed, which are not installed: "
     "pip install 'sst-cdma[sweep]'"),
])
def test_a_command_whose_extra_is_missing_says_which_to_install(monkeypatch, capsys, argv,
                                                                absent, words):
    _without(monkeypatch, *absent)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == f"sst-cdma: {words}\n"


def test_regress_in_this_process_needs_no_extra(monkeypatch):
    _without(monkeypatch, "dask", "distributed")
    extras.require("sweep", "x", ())  # nothing asked, nothing missing
    with pytest.raises(extras.MissingExtra, match=r"\[sweep\]"):
        extras.require("sweep", "regress --workers", ("dask",))


def test_ci_runs_the_readmes_command_with_the_linter_and_the_type_checker():
    readme = (REPO / "README.md").read_text("utf-8")
    command = readme.split("what `.ci/run` does", 1)[1].split("```\n", 1)[1].split("\n", 1)[0]
    assert command.endswith("pytest -q && ruff check sst_cdma components && mypy")
    assert command in (REPO / ".ci" / "run").read_text("utf-8")
    tools = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]
    assert tools["mypy"]["files"] == ["sst_cdma", "components", "workloads"]
    # every error code on, and no package exempt
    assert "disable_error_code" not in tools["mypy"]
    assert not [o for o in tools["mypy"].get("overrides", []) if o.get("ignore_errors")]
    assert "select" in tools["ruff"]["lint"]
    assert {"mypy", "ruff"} <= _names(PROJECT["optional-dependencies"]["test"])
