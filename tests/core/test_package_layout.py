"""The checkout is the package: every module's import path is its place in the tree, and after
a non-editable install the README's Python example and every documented ``python -m`` entry
work from the repository root (where the source folders shadow the installed ones)."""
from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
from installed_copy import install_a_copy

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("sst_cdma", "components", "workloads")
DOCS = [REPO / "README.md", REPO / "EVALUATION.md", *sorted((REPO / "docs").rglob("*.md"))]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out.append((".".join(parts), path))
    return out


def documented_entries() -> list[str]:
    """Every module the docs run with ``python -m``."""
    found = set()
    for doc in DOCS:
        found.update(re.findall(r"python3? -m ([A-Za-z_][\w.]*)", doc.read_text("utf-8")))
    return sorted(found - {"pip", "pytest", "venv"})


def test_there_is_no_package_dir_mapping():
    assert not (REPO / "setup.py").exists()
    assert "package-dir" not in (REPO / "pyproject.toml").read_text("utf-8")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_imports_from_its_place_in_the_tree(package):
    for name, path in _modules():
        if name.split(".")[0] != package:
            continue
        spec = importlib.util.find_spec(name)
        assert spec is not None and Path(spec.origin).resolve() == path.resolve(), name


def test_the_docs_name_only_entries_that_exist():
    entries = documented_entries()
    assert "sst_cdma.tools.workloads" in entries
    names = {name for name, _ in _modules()}
    for entry in entries:
        assert entry in names, f"the docs run python -m {entry}, which is no module"


def _readme_example() -> str:
    text = (REPO / "README.md").read_text("utf-8")
    block = text.split("## In Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    return block + "\nprint(result.reports['summary']['iteration_time_s'])\n"


@pytest.mark.slow  # a plain install into a fresh environment (.ci/run makes one too)
def test_after_a_plain_install_the_readme_example_and_python_m_run_from_the_checkout(tmp_path):
    """A copy of the tracked files, installed (not editable) into a fresh environment that sees
    this one's dependencies; then run from the copy's root."""
    root, python, _, env = install_a_copy(tmp_path)
    env_dir = tmp_path / "env"
    installed = subprocess.run([python, "-c", "import components, workloads, sst_cdma; "
                                "print(components.__file__, workloads.__file__)"],
                               cwd=tmp_path, capture_output=True, text=True, check=True, env=env)
    assert str(env_dir) in installed.stdout  # the installed copies, away from the checkout
    example = subprocess.run([python, "-c", _readme_example()], cwd=root, capture_output=True,
                             text=True, env=env)
    assert example.returncode == 0, example.stderr
    assert float(example.stdout.split()[-1]) > 0 and (root / "out" / "summary.json").exists()
    for entry in documented_entries():
        run = subprocess.run([python, "-m", entry, "--help"], cwd=root, capture_output=True,
                             text=True, env=env)
        assert run.returncode == 0 and "usage" in run.stdout, f"python -m {entry}: {run.stderr}"
