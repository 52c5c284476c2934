"""``sst-cdma topologies``: the shipped topology scripts, each with the first sentence of its
docstring, read without running it."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from sst_cdma.engine.file_reads import read_text
from sst_cdma.engine.library import find_topology, shipped_topologies
from sst_cdma.engine.runner import SCRIPT_FILE

WIDTH = 100


def summary_line(path: Path) -> str:
    """The first sentence of the script's docstring on one line ("" without one)."""
    try:
        doc = ast.get_docstring(ast.parse(read_text(path, SCRIPT_FILE))) or ""
    except (SyntaxError, ValueError):  # FileReadError is a ValueError
        return ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    end = text.find(". ")
    return text[:end + 1] if end >= 0 else text


def listing() -> str:
    """Every shipped script, its folder and how to run one."""
    shipped = shipped_topologies()
    if not shipped:
        return "no topologies are shipped (no package registers under sst_cdma.topologies)\n"
    folders = sorted({str(path.parent) for path in shipped.values()})
    width = max(len(name) for name in shipped) + 2
    lines = [f"shipped topologies (in {', '.join(folders)}); run one as: sst NAME.py "
             "[-- model options]"]
    for name, path in shipped.items():
        line = textwrap.shorten(summary_line(path), WIDTH - width - 2, placeholder=" ...")
        lines.append(f"  {name:<{width}}{line}".rstrip())
    return "\n".join(lines) + "\n"


def path_of(name: str) -> Path:
    """The path of the shipped script ``name``; LookupError naming the shipped ones."""
    found = find_topology(name)
    if found is None:
        known = ", ".join(shipped_topologies()) or "none"
        raise LookupError(f"topologies --path {name}: no shipped topology of that name "
                          f"(shipped: {known})")
    return found
