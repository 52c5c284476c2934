"""No function anywhere in the product -- the package (sst_cdma/, every floor and the tools),
the element library (components/), the workloads (workloads/) and the shipped topology scripts
(topologies/) -- is over 80 lines: a longer one is cut into named steps."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKED = ("sst_cdma", "components", "workloads", "topologies")
MAX_LINES = 80


def long_functions() -> list[tuple[str, int]]:
    """``path:function`` and length of every function over :data:`MAX_LINES` lines."""
    found = []
    for folder in CHECKED:
        for path in sorted((REPO / folder).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), name)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_LINES:
                        found.append((f"{name}:{node.name}", lines))
    return found


def test_no_function_is_over_80_lines():
    over = [f"{where} ({lines} lines)" for where, lines in long_functions()]
    assert not over, "functions over 80 lines: " + ", ".join(over)


def test_the_check_sees_every_checked_folder():
    for folder in CHECKED:
        assert any((REPO / folder).rglob("*.py")), folder
