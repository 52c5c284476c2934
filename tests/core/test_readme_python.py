"""The README's "In Python" examples, run as written from a folder holding ``topologies/``: the
statistics example's figure is the one the console prints (issue #34: it summed
``offload_raw_bytes`` over the system's engine and the vDNN baseline's, twice the console's
figure)."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from components.console import _sizes

REPO = Path(__file__).resolve().parents[2]


def python_blocks() -> list[str]:
    """The ```python blocks of the README's "In Python" section, in order."""
    text = (REPO / "README.md").read_text("utf-8")
    section = text.split("## In Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def run_block(code: str, scope: dict[str, Any]) -> Any:
    """Run ``code`` in ``scope``; the value of its last line (an expression), as a REPL
    shows it."""
    tree = ast.parse(code)
    last = tree.body.pop()
    assert isinstance(last, ast.Expr), "the example ends with the figure it shows"
    exec(compile(tree, "README.md", "exec"), scope)
    return eval(compile(ast.Expression(last.value), "README.md", "eval"), scope)


def test_the_statistics_example_gives_the_figure_the_console_prints(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "topologies").symlink_to(REPO / "topologies")
    run_example, statistics_example = python_blocks()[:2]
    scope: dict[str, Any] = {}
    run_block(run_example, scope)
    assert capsys.readouterr().out == ""  # run prints nothing: the text is on the result
    console = scope["result"].console_text
    offloaded = run_block(statistics_example, scope)
    summary = scope["result"].reports["summary"]
    assert offloaded == summary["offloaded_bytes"] > 0
    raw = _sizes(offloaded)[0]
    assert f"offloaded:       {raw} raw" in console
    # the figure the comment beside the example quotes
    assert f'"offloaded: {raw} raw"' in statistics_example
