"""A copy of the checkout's tracked files, built and installed (not editable) into a fresh
virtual environment: what a user gets from ``pip install .``, for the packaging tests.

The fresh environment sees the packages of the environment running the tests (numpy, pandas,
...) through a ``.pth`` file that lists its site-packages folders, and only those: not the
machine's own site-packages (which may hold anything installed by hand), and not the checkout
itself (an editable install's own ``.pth`` files in those folders are not read). The wheel is
built without build isolation and without an index, with the ``setuptools`` and ``wheel`` that
the ``[test]`` extra installs (``pyproject.toml``'s ``[build-system] requires``)."""
from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def copy_tracked_files(dest: Path) -> Path:
    """Copy the files git tracks in the checkout into ``dest``; returns ``dest``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


def these_site_packages() -> list[str]:
    """The site-packages folders of the environment running the tests, in its order."""
    folders = [*site.getsitepackages(), sysconfig.get_path("purelib"),
               sysconfig.get_path("platlib")]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return [f for i, f in enumerate(folders) if f not in folders[:i] and os.path.isdir(f)]


def fresh_environment(env_dir: Path) -> tuple[str, Path]:
    """A virtual environment in ``env_dir`` without pip, seeing this environment's packages
    after its own; returns (its python, its site-packages)."""
    venv.create(env_dir, system_site_packages=False, with_pip=False)
    python = str(env_dir / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; "
                              "print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "_the_tests_environment.pth").write_text(
        "".join(f"{folder}\n" for folder in these_site_packages()), encoding="utf-8")
    return python, Path(purelib)


def install_a_copy(tmp: Path) -> tuple[Path, str, Path, dict[str, str]]:
    """The tracked files copied to ``tmp/checkout`` and installed from there (built into a
    wheel, no dependencies) into a fresh environment ``tmp/env``; returns (the copy, the
    environment's python, its site-packages, an environment for subprocesses without
    PYTHONPATH). Raises AssertionError with pip's output when the install fails."""
    root = copy_tracked_files(tmp / "checkout")
    python, site_packages = fresh_environment(tmp / "env")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install",
                           "--no-deps", "--no-build-isolation", "--no-index", "-q", str(root)],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"pip install of the copy failed:\n{done.stdout}{done.stderr}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return root, python, site_packages, env
