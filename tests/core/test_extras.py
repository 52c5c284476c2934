"""The base install runs a topology; each command of an extra that is not installed says, in
one line, which extra to install; ``[test]`` pulls every extra the suite needs."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
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
    assert command.startswith("pip install torch==")
    assert command.endswith("pytest -q && ruff check . && mypy")
    taken = subprocess.run([sys.executable, str(REPO / ".ci" / "readme_command.py")],
                           capture_output=True, text=True, check=True).stdout
    assert taken == command + "\n"                     # what .ci/run runs, read from the README
    assert "$(python3 .ci/readme_command.py)" in (REPO / ".ci" / "run").read_text("utf-8")
    tools = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]
    assert tools["mypy"]["files"] == ["sst_cdma", "components", "workloads"]
    # every error code on, and no package exempt
    assert "disable_error_code" not in tools["mypy"]
    assert not [o for o in tools["mypy"].get("overrides", []) if o.get("ignore_errors")]
    assert "select" in tools["ruff"]["lint"]
    assert {"mypy", "ruff"} <= _names(PROJECT["optional-dependencies"]["test"])


def test_the_test_extra_installs_what_the_packaging_tests_build_the_wheel_with():
    """tests/core/installed_copy.py builds without build isolation or an index: the build
    system's requirements must come with ``[test]`` (a fresh environment has no ``wheel`` and
    Python 3.11's bundled setuptools 65, older than the build system asks for)."""
    build = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["build-system"]
    assert set(build["requires"]) <= set(PROJECT["optional-dependencies"]["test"])


def _ci_copy(tmp_path: Path, command: str) -> Path:
    """A folder with .ci/ and a README whose second quickstart command is ``command``."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / ".ci", root / ".ci")
    (root / "README.md").write_text(f"# x\n\n## Quickstart\n\n```\npip install .\n```\n\n"
                                    f"```\n{command}\n```\n\n## Next\n\n```\nno\n```\n")
    return root


def test_ci_runs_the_command_in_a_fresh_environment_and_exits_with_its_status(tmp_path):
    """Inside, python is a new virtual environment's that sees none of the machine's packages
    (PyYAML, installed here, is not importable), stdin is empty, and SIGINT is at its default
    though .ci/run was started with it ignored (as ``nohup .ci/run &`` does); pytest's 5 (no
    tests) or any other status comes out as .ci/run's own; the environment is removed."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = ("python -c 'import sys; print(\"inside\", sys.prefix)' && "
               "! python -c 'import yaml' 2>/dev/null && ! read -r line && "
               "python -c 'import signal as s; assert s.getsignal(s.SIGINT) is "
               "s.default_int_handler' && exit 5")
    env = {**os.environ, "TMPDIR": str(scratch), "CI": "true"}
    env.pop("VIRTUAL_ENV", None)
    ignoring = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "os.execvp('bash', ['bash', sys.argv[1]])")
    ci = _ci_copy(tmp_path, command) / ".ci" / "run"
    done = subprocess.run([sys.executable, "-c", ignoring, str(ci)], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert done.returncode == 5, done.stdout + done.stderr
    prefix = Path(next(ln for ln in done.stdout.splitlines() if ln.startswith("inside ")).split(
        " ", 1)[1])
    assert prefix.parent == scratch and prefix != Path(sys.prefix)
    assert f"ci: {command}\n" in done.stdout and "ci: exit status 5 after " in done.stdout
    assert list(scratch.iterdir()) == []                # the environment removed


def test_ci_stops_in_one_line_when_the_readme_lost_the_command(tmp_path):
    root = _ci_copy(tmp_path, "pip install -e . && pytest -q")
    (root / "README.md").write_text("# x\n\n## Quickstart\n\n```\npip install .\n```\n")
    done = subprocess.run(["bash", str(root / ".ci" / "run")], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f".ci/readme_command.py: {root / 'README.md'}: the Quickstart section "
                           "has 1 code block(s), not two\n")
