"""benchmarks/commit_tree.py checks another commit out beside this one for the length of a
measurement and removes it after; bench_scale.py's comparison runs both trees and says whether
they simulated the same thing."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SMALL = ["--network", "alexnet", "--batch", "4", "--no-baselines"]


def load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _worktrees() -> str:
    return subprocess.run(["git", "worktree", "list"], cwd=BENCHMARKS, capture_output=True,
                          text=True, check=True).stdout


def test_the_other_tree_is_the_commit_checked_out_and_is_gone_after():
    tree = load("commit_tree")
    with tree.other_tree("HEAD") as other:
        committed = subprocess.run(["git", "show", "HEAD:sst_cdma/engine/flows.py"], cwd=BENCHMARKS,
                                   capture_output=True, text=True, check=True).stdout
        assert (other / "sst_cdma" / "engine" / "flows.py").read_text() == committed
        assert str(other) in _worktrees()
    assert not other.exists()
    assert str(other) not in _worktrees()


def test_a_revision_git_cannot_check_out_is_one_line_naming_it():
    tree = load("commit_tree")
    with pytest.raises(tree.CheckoutError) as info:
        with tree.other_tree("no-such-revision-anywhere"):
            pass
    message = str(info.value)
    assert message.startswith("--against no-such-revision-anywhere: ") and "\n" not in message


def test_the_scale_comparison_prints_the_ratio_and_finds_one_commit_identical_to_itself(capsys):
    bench = load("bench_scale")
    assert bench.against("HEAD", 8, 1, SMALL)
    out = capsys.readouterr().out
    assert "ratio = this tree / HEAD = " in out
    assert "simulated results (summary, simulated time): identical" in out
    assert "KiB per GPU" in out


def test_memory_per_gpu_is_the_growth_of_the_peak_over_the_gpus():
    bench = load("bench_scale")
    assert bench.per_gpu_kib({"peak_mib": 100.0, "base_mib": 60.0}, 8) == pytest.approx(5120.0)
