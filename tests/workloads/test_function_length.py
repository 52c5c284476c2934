"""No function of workloads/ is longer than 80 lines (the project's limit: split it into
named steps)."""
from __future__ import annotations

import ast
from pathlib import Path

import workloads

PACKAGE = Path(workloads.__file__).resolve().parent


def test_no_function_over_80_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 80:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
