"""Who may import whom, checked on the source with ``ast`` (nothing is imported, so it is fast).

- The SST engine (kernel, elements, simulation, configuration, graph files, units, flows,
  statistics, runner, progress, atomic files, libraries, reading files, strict parsing) imports
  only itself: nothing of the
  element library ``components``, of the models (``sst_cdma.model``, ``codecs``, ``profiles``,
  ``topology``, ``baselines``, ``model_options``) or of ``workloads``; and its code names no
  cDMA element, param or system.
- Within ``components/``, only the modules of :data:`WORKLOAD_IMPORTERS` import ``workloads``.
- The report (the reporter element and the modules that compose the summary, the console and
  the trace) reads the typed result records the elements publish: it imports no workload or
  model, and it does not reach into the simulation's elements.
- Every import of the project's packages names a module of the checkout (``sst_cdma.workloads``
  and ``sst_cdma.components`` are gone: an old editable install still maps them elsewhere).
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
#: the engine: every module of sst_cdma/engine (the package's root, which re-exports its API,
#: with it)
ENGINE_FOLDER = ROOT / "sst_cdma" / "engine"
#: the engine's test elements (SST core's PHOLD and friends) may name what they test
ENGINE_TEST_ELEMENTS = ENGINE_FOLDER / "testelements"
#: sst_cdma modules outside the engine that the engine may import, and why
ENGINE_EXCEPTIONS: set[str] = set()
#: the modules of components/ that import workloads: the workload subcomponents (the slot's
#: interface and the elements that fill it)
WORKLOAD_IMPORTERS = {"workload_source.py", "network_workload.py", "stream_workload.py",
                      "synthetic_workload.py", "pipeline_stage_workload.py",
                      # the cluster fabric: its ranks' process groups from the one table of them
                      "cluster_fabric.py"}
MODEL_PACKAGES = ("sst_cdma.model", "sst_cdma.codecs", "sst_cdma.profiles", "sst_cdma.builder.topology",
                  "sst_cdma.builder.baselines", "sst_cdma.builder.model_options")
#: words of the cDMA model that engine code (names and strings, docstrings aside) must not use
CDMA_WORDS = re.compile(r"gpu|cdma|baseline|oracle|vdnn|hbm|pcie|nvlink|nvswitch|dma|"
                        r"main_?system|main_end|summary|reporter|workload|tensor|policy",
                        re.IGNORECASE)
#: engine code that may name the cDMA model (none: the element library registers itself)
WORD_EXCEPTIONS: set[tuple[str, str]] = set()


def engine_files() -> list[Path]:
    """The engine's source files."""
    return sorted(ENGINE_FOLDER.rglob("*.py"))


def engine_module_names() -> set[str]:
    """The dotted names of the engine's modules and packages, and the package root's."""
    return {module_name(path) for path in engine_files()} | {"sst_cdma"}


def module_name(path: Path) -> str:
    """The dotted module name of a source file under the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source`` of module ``module``, at any
    depth (imports inside functions count); ``from . import x`` gives ``package.x``."""
    return imports_in(ast.parse(source), module, is_package)


def imports_in(tree: ast.AST, module: str, is_package: bool = False,
               skip: "set[int] | None" = None) -> list[tuple[int, str]]:
    """:func:`imports` of a parsed module, leaving out the nodes whose ids are in ``skip``."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if skip and id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            if node.module is None:  # from . import a, b: the submodules a and b
                found += [(node.lineno, f"{prefix}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, prefix))
    return found


def _within(name: str, packages: "tuple[str, ...] | set[str]") -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _file_imports(path: Path) -> list[tuple[int, str]]:
    return imports(path.read_text(encoding="utf-8"), module_name(path),
                   path.name == "__init__.py")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants in ``tree``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _words(node: ast.AST) -> Iterator[str]:
    """The names and strings a node brings into the code."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.keyword) and node.arg:
        yield node.arg
    elif isinstance(node, ast.alias):
        yield node.asname or node.name


def _excepted_nodes(tree: ast.AST, filename: str) -> set[int]:
    """ids of the nodes under an assignment that :data:`WORD_EXCEPTIONS` allows."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and (filename, t.id) in WORD_EXCEPTIONS
                for t in node.targets):
            out |= {id(n) for n in ast.walk(node)}
    return out


def cdma_words(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: word`` for every name or string (docstrings aside) of the code that uses
    a word of the cDMA model; the package's own name ``sst_cdma`` does not count."""
    tree = ast.parse(source, filename)
    skip = _docstrings(tree) | _excepted_nodes(tree, filename)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        for word in _words(node):
            if CDMA_WORDS.search(word.replace("sst_cdma", "")):
                found.append((getattr(node, "lineno", 0), word))
    return [f"{filename}:{line}: {word!r}" for line, word in sorted(found)]


#: imports of gone modules in files that another change is rewriting right now
KNOWN_MISSING: set[str] = set()


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def missing_modules(path: Path) -> list[str]:
    """``file:line: module`` for every import in ``path`` of a module of the project's packages
    that the checkout does not have (``from a import b``: ``a`` must be a module)."""
    found = []
    for line, name in _file_imports(path):
        if not _within(name, ("sst_cdma", "components", "workloads")):
            continue
        if not (_is_module(name) or _is_module(name.rpartition(".")[0])):
            found.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            name = imports(ast.unparse(node), module_name(path), path.name == "__init__.py")[0][1]
            if _within(name, ("sst_cdma", "components", "workloads")) and not _is_module(name):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    return sorted(set(found))


def test_every_import_names_a_module_of_the_checkout():
    files = [p for folder in ("sst_cdma", "components", "workloads", "topologies", "tests")
             for p in sorted((ROOT / folder).rglob("*.py"))
             if "broken" not in p.relative_to(ROOT).parts]  # tests/core/broken: bad on purpose
    found = [hit for path in files for hit in missing_modules(path) if hit not in KNOWN_MISSING]
    assert found == [], "imports of modules the checkout does not have:\n" + "\n".join(found)


def test_the_engine_imports_only_itself():
    allowed = engine_module_names() | ENGINE_EXCEPTIONS
    files = engine_files()
    assert len(files) >= 25  # the scan sees the engine's modules and packages
    found = [f"{path.relative_to(ROOT)}:{line}: {name}"
             for path in files for line, name in _file_imports(path)
             if (_within(name, ("sst_cdma", "components", "workloads"))
                 and not _within(name, allowed))]
    assert found == [], "the engine imports beyond itself:\n" + "\n".join(found)


def test_the_engine_code_names_nothing_of_the_cdma_model():
    found = [hit for path in engine_files() if ENGINE_TEST_ELEMENTS not in path.parents
             for hit in cdma_words(path.read_text(encoding="utf-8"), path.name)]
    assert found == [], "engine code naming the cDMA model:\n" + "\n".join(found)


def test_only_the_listed_components_import_workloads():
    files = sorted((ROOT / "components").glob("*.py"))
    importers = {path.name for path in files
                 if any(_within(name, ("workloads",)) for _, name in _file_imports(path))}
    assert importers <= WORKLOAD_IMPORTERS, \
        f"components/ modules importing workloads beyond the allow-list: " \
        f"{sorted(importers - WORKLOAD_IMPORTERS)}"
    # a module that no longer imports workloads leaves the list
    assert importers == WORKLOAD_IMPORTERS, \
        f"allow-listed modules that import no workloads: {sorted(WORKLOAD_IMPORTERS - importers)}"


REPORT_MODULES = ("reporter.py", "summary.py", "console.py", "trace.py")
#: import-free tables of names the report may read (they compute nothing)
#: (and the element types whose params its hints name, in the caller's words)
REPORT_TABLES = {"sst_cdma.model.policies", "sst_cdma.model.element_params"}


@pytest.mark.parametrize("module", REPORT_MODULES)
def test_the_report_reads_only_result_records(module):
    path = ROOT / "components" / module
    source = path.read_text(encoding="utf-8")
    bad = [f"{module}:{line}: {name}" for line, name in _file_imports(path)
           if _within(name, ("workloads", *MODEL_PACKAGES)) and name not in REPORT_TABLES]
    assert bad == [], "the report imports workloads or models:\n" + "\n".join(bad)
    reaches = [f"{module}:{node.lineno}: {ast.unparse(node)}"
               for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Attribute) and node.attr in ("components", "link_end")
               and "simulation" in ast.unparse(node.value)]
    assert reaches == [], "the report reaches into elements:\n" + "\n".join(reaches)


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (imports for the type checker alone)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


@lru_cache(maxsize=None)  # the cycle and the floor tests read the same graph; neither edits it
def import_graph(packages: tuple[str, ...] = ("sst_cdma", "components", "workloads",
                                              "topologies")) -> "nx.DiGraph":
    """Module -> the modules of ``packages`` it imports, at any depth (imports inside
    functions count; those for the type checker alone do not); ``from a import b`` names the
    module ``a.b`` where there is one, else ``a``."""
    import networkx as nx

    paths = {module_name(p): p for folder in packages
             for p in sorted((ROOT / folder).rglob("*.py"))}
    graph = nx.DiGraph()
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph.add_node(name)
        for _, target in imports_in(tree, name, path.name == "__init__.py", _type_only(tree)):
            for candidate in (target, target.rpartition(".")[0]):
                if candidate in paths and candidate != name:
                    graph.add_edge(name, candidate)
                    break
    return graph


def test_no_import_cycle_anywhere():
    """The modules of the product import one another without a circle: each floor imports
    only floors below it."""
    import networkx as nx

    graph = import_graph()
    assert graph.number_of_edges() > 500                     # the scan sees the imports
    knots = sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)
    assert knots == [], "import cycles:\n" + "\n".join(
        " -> ".join(a for a, _ in nx.find_cycle(graph.subgraph(knot))) for knot in knots)


#: the floors, lowest first: each imports only its own and those below (type-only imports
#: aside); the package root ``sst_cdma`` re-exports the engine's API and stands with it
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine", ("sst_cdma.engine", "sst_cdma")),
    ("model", ("sst_cdma.model", "sst_cdma.codecs")),
    ("workloads", ("workloads",)),
    ("profiles", ("sst_cdma.profiles",)),
    ("elements", ("components",)),
    ("builder", ("sst_cdma.builder", "topologies")),
    ("tools", ("sst_cdma.tools", "sst_cdma.__main__")),
)


def floor_of(module: str) -> int:
    """The floor of ``module`` (its index in :data:`FLOORS`): the longest prefix that names
    one."""
    best = (-1, -1)
    for index, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), index)
    assert best[1] >= 0, f"{module} is on no floor"
    return best[1]


def test_each_floor_imports_only_floors_below_it():
    graph = import_graph()
    up = [f"{a} ({FLOORS[floor_of(a)][0]}) imports {b} ({FLOORS[floor_of(b)][0]})"
          for a, b in graph.edges() if floor_of(b) > floor_of(a)]
    assert up == [], "imports reaching up a floor:\n" + "\n".join(sorted(up))


def test_ls_shows_the_floors():
    """Inside sst_cdma/ each floor is a folder: at most 8 rooms, every module in one."""
    rooms = sorted(p.name for p in (ROOT / "sst_cdma").iterdir()
                   if p.name != "__pycache__" and p.suffix != ".typed")
    assert len(rooms) <= 8, rooms
    assert rooms == ["__init__.py", "__main__.py", "builder", "codecs", "engine", "model",
                     "profiles", "tools"]
