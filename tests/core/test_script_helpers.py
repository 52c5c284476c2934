"""A topology script's own helper modules: each script in a process (a sweep worker runs many)
imports the helpers of its own folder, as they are now."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma

SCRIPT = """\
import sst
from {imports}
a = sst.Component("a", "testElement.Echo")
a.addParams({{"rounds": ROUNDS}})
b = sst.Component("b", "testElement.Echo")
sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
"""


def _topology(folder: Path, rounds: int, package: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if package:  # a package without __init__.py: a namespace package
        (folder / "mylib").mkdir(exist_ok=True)
        (folder / "mylib" / "rounds.py").write_text(f"ROUNDS = {rounds}\n")
        imports = "mylib.rounds import ROUNDS"
    else:
        (folder / "helper_rounds.py").write_text(f"ROUNDS = {rounds}\n")
        imports = "helper_rounds import ROUNDS"
    script = folder / "topo.py"
    script.write_text(SCRIPT.format(imports=imports))
    return script


def _rounds(script: Path) -> int:
    result = sst_cdma.run(script, run_mode="init", console=io.StringIO())
    return int(result.graph.components["a"].params["rounds"])


@pytest.mark.parametrize("package", [False, True])
def test_two_folders_with_same_named_helpers_each_get_their_own(tmp_path, package):
    first = _topology(tmp_path / "one", 3, package)
    second = _topology(tmp_path / "two", 5, package)
    assert (_rounds(first), _rounds(second), _rounds(first)) == (3, 5, 3)


def test_an_edited_helper_is_read_again(tmp_path):
    script = _topology(tmp_path / "one", 3)
    assert _rounds(script) == 3
    (tmp_path / "one" / "helper_rounds.py").write_text("ROUNDS = 4  # edited\n")
    assert _rounds(script) == 4
