"""The topology scripts ship with the package: ``sst NAME.py`` finds a shipped one by its bare
name when the working folder has no such file, ``sst-cdma topologies`` lists them, and a path
to a missing file says how to reach the shipped one."""
from __future__ import annotations

import io
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from sst_cdma.engine import library
from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.engine.runner import RunError, run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def shipped(monkeypatch):
    """The checkout's topologies/ registered as this distribution registers it (an editable
    install made before the entry point existed does not list it)."""
    point = EntryPoint("cdma", "topologies", library.TOPOLOGY_ENTRY_POINT_GROUP)
    monkeypatch.setattr(library, "entry_points",
                        lambda group: [point] if group == point.group else [])
    library.shipped_topologies.cache_clear()
    yield library.shipped_topologies()
    library.shipped_topologies.cache_clear()


def test_pyproject_registers_the_topologies_package():
    text = (REPO / "pyproject.toml").read_text("utf-8")
    assert '[project.entry-points."sst_cdma.topologies"]\ncdma = "topologies"' in text
    assert (REPO / "topologies" / "__init__.py").is_file()


def test_every_script_of_topologies_is_shipped(shipped):
    scripts = sorted(p.name for p in (REPO / "topologies").glob("*.py") if p.name[0] != "_")
    assert sorted(shipped) == scripts and "pascal_cdma.py" in shipped
    assert shipped["pascal_cdma.py"] == (REPO / "topologies" / "pascal_cdma.py").resolve() or \
        shipped["pascal_cdma.py"].samefile(REPO / "topologies" / "pascal_cdma.py")


def test_a_bare_name_runs_the_shipped_script_when_the_folder_has_none(shipped, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("phold_torus.py", "phold_torus"):
        result = run(name, "--size 3 --events 2 --time-limit 100ns", console=io.StringIO())
        assert result.events > 0 and Path(result.graph.source).name == "phold_torus.py"


def test_a_file_in_the_folder_wins_over_the_shipped_one(shipped, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pascal_cdma.py").write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(RunError, match="exited with status 3"):
        run("pascal_cdma.py", console=io.StringIO())


def test_a_missing_path_names_the_shipped_script_of_its_name(shipped, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunError) as info:
        run("topologies/pascal_cdma.py")
    assert str(info.value) == ("topologies/pascal_cdma.py: no such topology file (the shipped "
                               "pascal_cdma.py is found by its bare name: pascal_cdma.py)")
    with pytest.raises(RunError, match=r"^nope\.py: no such topology file$"):
        run("nope.py")


def test_sst_cdma_topologies_lists_each_with_its_first_sentence(shipped, capsys):
    assert main(["topologies"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("shipped topologies (in ") and "sst NAME.py" in out[0]
    assert len(out) == 1 + len(shipped)
    line = next(o for o in out if o.lstrip().startswith("pascal_vdnn.py"))
    assert line.split(None, 1)[1] == "The same Tesla P100 system with vDNN's plain copy " \
                                     "engine (no compression)."
    assert all(len(o) <= 100 for o in out[1:])


def test_sst_cdma_topologies_path(shipped, capsys):
    assert main(["topologies", "--path", "pascal_cdma"]) == 0
    assert Path(capsys.readouterr().out.strip()).samefile(REPO / "topologies" / "pascal_cdma.py")
    assert main(["topologies", "--path", "nope.py"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sst-cdma: topologies --path nope.py: no shipped topology of that "
                          "name (shipped: dgx1_cdma.py, ") and err.count("\n") == 1


def test_python_m_sst_cdma_is_the_sst_cdma_command():
    out = subprocess.run([sys.executable, "-m", "sst_cdma", "--version"], capture_output=True,
                         text=True, cwd=REPO)
    assert out.returncode == 0 and out.stdout.startswith("sst-cdma ")
    out = subprocess.run([sys.executable, "-m", "sst_cdma"], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 1 and "no command given" in out.stderr
