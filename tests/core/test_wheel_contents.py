"""What a non-editable install carries beyond the modules: the topology scripts (found by
name from any folder), ``py.typed``, the JSON Schemas, the LICENSE, the classifiers."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from installed_copy import install_a_copy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A copy of the tracked files installed (not editable, no dependencies) into a fresh
    environment that sees this one's dependencies: (its python, its site-packages, env)."""
    _, python, site, env = install_a_copy(tmp_path_factory.mktemp("wheel"))
    return python, site, env


def test_the_install_carries_scripts_markers_schemas_and_license(installed):
    _, site, _ = installed
    shipped = sorted(p.name for p in (site / "topologies").glob("*.py"))
    assert shipped == sorted(p.name for p in (REPO / "topologies").glob("*.py"))
    for package in ("sst_cdma", "components", "workloads"):
        assert (site / package / "py.typed").is_file(), package
    assert (site / "components" / "summary.schema.json").is_file()
    assert (site / "sst_cdma" / "profiles" / "profile.schema.json").is_file()
    info = next(site.glob("sst_cdma-*.dist-info"))
    metadata = (info / "METADATA").read_text("utf-8")
    assert "Classifier: License :: OSI Approved :: BSD License" in metadata
    assert "Provides-Extra: sweep" in metadata and "Provides-Extra: report" in metadata
    assert any("BSD 3-Clause License" in p.read_text("utf-8")
               for p in info.rglob("LICENSE*") if p.is_file())
    assert "[sst_cdma.topologies]\ncdma = topologies" in (info / "entry_points.txt").read_text()


def test_from_an_empty_folder_a_bare_name_runs_the_shipped_script(installed, tmp_path):
    python, site, env = installed
    listing = subprocess.run([python, "-m", "sst_cdma", "topologies"], cwd=tmp_path,
                             capture_output=True, text=True, env=env)
    assert listing.returncode == 0 and str(site / "topologies") in listing.stdout
    run = subprocess.run([python, "-m", "sst_cdma.tools.cli.sst_main", "phold_torus.py", "--",
                          "--size", "3", "--events", "2", "--time-limit", "100ns"],
                         cwd=tmp_path, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "Simulation is complete" in run.stdout
