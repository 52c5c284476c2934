"""The element library reaches into no private attribute of the core or of other objects: every
``x._name`` in components/*.py is on ``self`` (or ``cls``, or ``super()``). What an element
needs from another goes through a declared interface (``peer_provider``), a service
(``self.service``) or a public call (``schedule_at``), so a new element has public calls to
imitate."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

COMPONENTS = Path(__file__).resolve().parents[2] / "components"
OWN = ("self", "cls")
ATTRIBUTE_CALLS = ("getattr", "setattr", "hasattr", "delattr")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own attributes."""
    if isinstance(node, ast.Name):
        return node.id in OWN
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")


def private_accesses(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: expression`` for every reach into a private name of another object:
    ``x._name`` where x is not self/cls/super(), ``getattr(x, "_name")`` and the like, and
    ``from sst_cdma... import _name``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value):
            found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ATTRIBUTE_CALLS and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value) and not _own(node.args[0])):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sst_cdma"):
            found.extend((node.lineno, f"from {node.module} import {alias.name}")
                         for alias in node.names if _private(alias.name))
    return [f"{filename}:{line}: {text}" for line, text in sorted(found)]


def test_components_reach_into_no_private_attribute():
    files = sorted(COMPONENTS.glob("*.py"))
    assert len(files) >= 8  # the scan sees the library
    found = [hit for path in files
             for hit in private_accesses(path.read_text(encoding="utf-8"), path.name)]
    assert found == [], "private attributes reached from components/:\n" + "\n".join(found)


@pytest.mark.parametrize("line, reach", [
    ("self.sim._flows", "self.sim._flows"),
    ("self.sim._flow_network.start(1, {}, None)", "self.sim._flow_network"),
    ("engine._done(req, wire, start)", "engine._done"),
    ("self.simulation._ends[('a', 'b')]", "self.simulation._ends"),
    ("self.pipeline.engine._done(1)", "self.pipeline.engine._done"),
    ("link._peer", "link._peer"),
    ("FlowNetwork._fill(group)", "FlowNetwork._fill"),
    ("getattr(self.sim, '_flow_network', None)", "getattr(self.sim, '_flow_network', None)"),
    ("setattr(sim, '_flow_network', net)", "setattr(sim, '_flow_network', net)"),
    ("from sst_cdma.engine.kernel import _Stop", "from sst_cdma.engine.kernel import _Stop"),
])
def test_the_scan_catches_reaches_into_other_objects(line, reach):
    assert private_accesses(line) == [f"<source>:1: {reach}"]


@pytest.mark.parametrize("line", [
    "self._queue.append(1)",
    "cls._cache",
    "super()._setup()",
    "type(self).__name__",
    "x.__class__",
    "getattr(self, '_seen', None)",
    "self.sim.now",
    "from sst_cdma.engine.flows import FlowNetwork",
    "from .messages import TransferDone",
])
def test_the_scan_allows_own_and_public_names(line):
    assert private_accesses(line) == []
