"""The modules of workloads/ import one another without a circle (every import counts, at
module level and inside functions; an import for the type checker alone, under
``if TYPE_CHECKING:``, does not: it runs never, and a dataclass may name the type of a module
built on its own)."""
from __future__ import annotations

import ast
from pathlib import Path

import workloads

PACKAGE = Path(workloads.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that module ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(node.test)
                 for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # ``from . import flops`` imports the module flops, not the package
            named = [f"{base}.{alias.name}" for alias in node.names
                     if f"{base}.{alias.name}" in modules]
            targets = named or [base]
        else:
            continue
        deps.update(t for t in targets if t in modules and t != name)
    return deps


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of ``graph`` as the list of its modules, or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_the_graph_is_read_from_the_sources():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert "workloads.stream_schema" in graph["workloads.stream"]
    assert "workloads.plan" in graph["workloads.vdnn"]
    assert "workloads.flops" in graph["workloads.network"]
    assert "workloads" not in graph["workloads.network"]  # from . import flops


def test_workloads_has_no_import_cycle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycle(graph) == []


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []
