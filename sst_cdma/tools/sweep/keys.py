"""Cache keys: a point is identified by the sha256 of everything that determines its result —
the topology script (and the modules it imports from its own folder), the model options, the
param overrides, the package version, and a digest of the model inputs shipped in the package:
every file of ``sst_cdma`` (kernel, model, topology building blocks, codecs, profiles) and of
its sibling packages ``workloads`` (network definitions, templates, density profiles)
and ``components`` (the element library), less the tools that cannot change a result
(this sweep package, regression, CLIs, capture). Any edit to the model invalidates the cache;
that is the point."""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional

import sst_cdma

from sst_cdma.engine.file_reads import GIB, FileKind, FileReadError, hash_into, read_bytes
from sst_cdma.engine.runner import SCRIPT_FILE
from sst_cdma.tools.sweep.marks import SpecError

#: Packages whose files are model inputs.
INPUT_PACKAGES = ("sst_cdma", "workloads", "components")
#: Subpackages of sst_cdma that are tools, not model: left out of the digest.
TOOL_PACKAGES = ("tools",)
KEY_LENGTH = 24  # hex digits of the sha256 used as a point's key (96 bits)
#: a file a point's option or param names (a checkpoint, a profile, a CPU-Adam file...),
#: hashed a chunk at a time
NAMED_FILE = FileKind("a file a sweep point names", 256 * GIB)


def _package_dir(name: str) -> Optional[Path]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _files(root: Path, skip: Iterable[str] = ()) -> Iterable[Path]:
    skip = set(skip)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if any(part == "__pycache__" or part.startswith(".") for part in rel):
            continue
        if rel and rel[0] in skip:
            continue
        if path.is_file() and path.suffix not in (".pyc", ".pyo"):
            yield path


def digest_tree(root: Path, label: str = "", skip: Iterable[str] = ()) -> str:
    """sha256 over the relative names and bytes of every file below ``root`` (caches, hidden
    files and the top-level entries named in ``skip`` left out), in sorted order."""
    h = hashlib.sha256()
    for path in _files(root, skip):
        h.update(f"{label}/{path.relative_to(root).as_posix()}\0".encode())
        hash_into(h, path, NAMED_FILE)
        h.update(b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def inputs_digest() -> str:
    """Digest of the package's model inputs (computed once per process)."""
    h = hashlib.sha256()
    seen: set[Path] = set()
    for name in INPUT_PACKAGES:
        root = _package_dir(name)
        if root is not None and root.resolve() in seen:
            continue
        skip = TOOL_PACKAGES if name == "sst_cdma" else ()
        if root is not None:
            seen.add(root.resolve())
        h.update(f"{name}={digest_tree(root, name, skip) if root else 'absent'}\n".encode())
    return h.hexdigest()


def _module_files(root: Path, parts: list[str]) -> list[Path]:
    """The files of the folder ``root`` that importing the dotted module ``parts`` (relative to
    ``root``) executes: the ``__init__.py`` of each package on the way (a folder without one is
    a namespace package) and the module itself (``x.py``, or ``x/__init__.py`` for a
    package). Nothing for a module that is not in ``root``."""
    out: list[Path] = []
    folder = root
    for part in parts:
        if not part.isidentifier():
            break
        if (folder / part / "__init__.py").is_file():      # a package
            out.append(folder / part / "__init__.py")
        elif (folder / f"{part}.py").is_file():             # a module: no submodules below
            out.append(folder / f"{part}.py")
            break
        elif not (folder / part).is_dir():                  # not here (or not a module)
            break
        folder = folder / part
    return out


def _local_imports(path: Path, root: Optional[Path] = None) -> list[Path]:
    """The modules of the folder ``root`` (default: ``path``'s own folder, the script's, which
    is first on ``sys.path`` when it runs) that ``path`` imports: ``import x`` / ``import
    x.y`` / ``from x.y import z`` where ``x.py`` or the package ``x/`` lies in ``root``, with
    every package's ``__init__.py`` on the way and ``z`` when it is a submodule; relative
    imports (``from . import z``) of a module inside such a package too."""
    root = path.parent if root is None else root
    try:
        tree = ast.parse(read_bytes(path, SCRIPT_FILE), str(path))
    except (SyntaxError, ValueError):  # FileReadError is a ValueError
        return []
    # dotted module names, relative to root: the module imported, then any names imported
    # from it that may be submodules
    wanted: list[list[str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted += [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = path.parent
                for _ in range(node.level - 1):
                    package = package.parent
                try:
                    base = list(package.relative_to(root).parts)
                except ValueError:  # above the script's folder: not one of its modules
                    continue
                if not base:  # the script's folder itself is not a package
                    continue
            else:
                base = []
            module = base + (node.module.split(".") if node.module else [])
            if not module:
                continue
            wanted.append(module)
            wanted += [module + [alias.name] for alias in node.names if alias.name != "*"]
    out: list[Path] = []
    for parts in wanted:
        for found in _module_files(root, parts):
            if found not in out:
                out.append(found)
    return out


def script_digest(script: Path) -> str:
    """sha256 of a topology script and, transitively, of the modules of its folder it imports
    (packages and their submodules included, with their ``__init__.py``)."""
    script = Path(script).resolve()
    root = script.parent
    h = hashlib.sha256()
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        rel = path.name if path == script else path.relative_to(root).as_posix()
        h.update(f"{rel}\0".encode())
        hash_into(h, path, SCRIPT_FILE)
        h.update(b"\0")
        todo.extend(_local_imports(path, root))
    return h.hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, or :func:`digest_tree` of a folder; FileReadError for what
    is neither (a FIFO, a device: never read, so never waited on)."""
    if path.is_dir():
        return digest_tree(path)
    h = hashlib.sha256()
    hash_into(h, path, NAMED_FILE)
    return h.hexdigest()


def point_key(script_sha: str, model_options: list[str], overrides: dict[str, Any],
              inputs: Optional[str] = None, version: Optional[str] = None,
              files: Optional[dict[str, str]] = None, full_trace: bool = False) -> str:
    """The cache key of one simulation (hex, :data:`KEY_LENGTH` digits). ``files`` maps the
    options and params that name files to their content digests, so an edited file runs again;
    ``full_trace`` (a point that keeps its full trace) makes another key."""
    payload: dict[str, Any] = {
        "script": script_sha,
        "options": list(model_options),
        "overrides": [[p, [[k, str(v)] for k, v in params.items()]]
                      for p, params in overrides.items()],
        "inputs": inputs if inputs is not None else inputs_digest(),
        "version": version if version is not None else sst_cdma.__version__,
    }
    if files:
        payload["files"] = sorted(files.items())
    if full_trace:
        payload["full_trace"] = True
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def key_of(point: Any, script_sha: str, inputs: Optional[str] = None,
           full_trace: bool = False) -> str:
    """The cache key of a sweep or regression :class:`~sst_cdma.tools.sweep.spec.Point`: its script,
    its options as written (sorted by name: their order does not make another point), its
    overrides (each pattern's params sorted by name), and the content of every file an option
    or a param names."""
    files = {}
    for name, path in point.named_files().items():
        try:
            files[name] = file_digest(Path(path))
        except FileReadError as exc:
            what = f"option {name}" if not name.startswith("params:") else \
                "param " + ".".join(json.loads(name[len("params:"):]))
            raise SpecError(f"{point.describe()}: {what} names {path}, which {exc}") from None
    return point_key(script_sha, point.canonical_options(), point.canonical_overrides(),
                     inputs, files=files, full_trace=full_trace)


__all__ = ["inputs_digest", "script_digest", "point_key", "key_of", "file_digest", "digest_tree",
           "INPUT_PACKAGES"]
