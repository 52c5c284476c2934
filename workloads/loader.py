"""Load network definitions from YAML: ``load_network(name_or_path) -> Network``.

A network file holds ``name``, ``description``, ``source``, ``notes``, optional ``macros`` and
the ``layers`` list. Each layer is ``{name, kind, inputs, params}``; ``inputs`` (a name or list
of names of earlier layers or macro instances) defaults to the previous layer. Macros from
``networks/_macros.yaml`` (fire, inception, bottleneck, bottleneck_proj) are always available;
a file's own ``macros`` add to or override them. A transformer file holds a ``transformer``
mapping instead of ``layers`` (expanded by :mod:`~workloads.transformer`); its
sequence length and attention form can be overridden (``seq_len``, ``attention``).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Mapping, Optional

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_yaml, read_text

from .errors import WorkloadError, read_fault
from .kinds import KINDS, normalize_params
from .macros import Macro, expand_layers, parse_macros
from .network import NAME_RE, Layer, Network
from .transformer import ATTENTIONS, TransformerConfig, expand_transformer, role_of

__all__ = ["NETWORKS", "CNNS", "TRANSFORMERS", "CAPTURE_NETWORKS", "NETWORK_DIR", "MACRO_LIBRARY",
           "load_network", "network_path", "load_macro_library"]

#: Folder of the shipped network definitions.
NETWORK_DIR = Path(__file__).resolve().parent / "networks"
#: Network files of the folder that are not among the studied networks: the small CNN that
#: ``sst-cdma capture`` trains and captures on the CPU.
CAPTURE_NETWORKS = ("digits_cnn",)
#: a network file: a layer per entry, written by hand (the largest shipped is tens of KiB)
NETWORK_FILE = FileKind("a network file", 16 * MIB)


def _shipped(transformers: bool) -> tuple[str, ...]:
    """The names of the shipped network files ``networks/<name>.yaml``, sorted: the
    transformers (a file with a top-level ``transformer:`` key) or the others. Files named
    ``_*`` (the macro library) and :data:`CAPTURE_NETWORKS` are left out."""
    names = []
    for path in sorted(NETWORK_DIR.glob("*.yaml")):
        if path.stem.startswith("_") or path.stem in CAPTURE_NETWORKS:
            continue
        lines = read_text(path, NETWORK_FILE).splitlines()
        if any(line.startswith("transformer:") for line in lines) == transformers:
            names.append(path.stem)
    return tuple(names)


#: The shipped CNNs.
CNNS = _shipped(transformers=False)
#: The shipped decoder-only transformers (``transformer:`` files).
TRANSFORMERS = _shipped(transformers=True)
#: The networks shipped with the package (files ``networks/<name>.yaml``).
NETWORKS = CNNS + TRANSFORMERS
#: The shared macro library.
MACRO_LIBRARY = NETWORK_DIR / "_macros.yaml"
_TOP_KEYS = {"name", "description", "source", "notes", "macros", "layers", "transformer"}


def network_path(name_or_path: str | os.PathLike[str]) -> Path:
    """Resolve a shipped network name (``"vgg16"``) or a path to a YAML file."""
    text = os.fspath(name_or_path)
    candidate = NETWORK_DIR / f"{text}.yaml"
    if isinstance(name_or_path, str) and not text.startswith("_") and candidate.is_file() \
            and os.sep not in text:
        return candidate
    path = Path(text)
    if path.exists() and not path.is_dir():  # a FIFO or a device is refused when read
        return path
    raise WorkloadError(
        f"no network {text!r}: not a shipped network ({', '.join(NETWORKS)}) nor a file"
    )


def _read_yaml(path: Path, label: str) -> Any:
    try:
        return load_yaml(path, NETWORK_FILE)
    except FileReadError as exc:
        raise WorkloadError(read_fault(exc, "network"), file=label) from None


@functools.lru_cache(maxsize=4)
def _library(mtime_ns: int) -> dict[str, Macro]:
    label = str(MACRO_LIBRARY)
    doc = _read_yaml(MACRO_LIBRARY, label)
    if not isinstance(doc, Mapping):
        raise WorkloadError("macro library must be a mapping with 'macros'", file=label)
    return parse_macros(doc.get("macros"), label, set(KINDS))


def load_macro_library() -> dict[str, Macro]:
    """The shared macros (``networks/_macros.yaml``)."""
    return dict(_library(MACRO_LIBRARY.stat().st_mtime_ns))


def load_network(name_or_path: str | os.PathLike[str], seq_len: int = 0,
                 attention: str = "") -> Network:
    """Load, expand and validate a network; raises :class:`WorkloadError` naming file and layer.

    ``seq_len`` and ``attention`` (``naive``/``fused``) override a transformer definition's
    (0 / '': the definition's); a CNN refuses them."""
    path = network_path(name_or_path)
    resolved, mtime_ns, label = str(path.resolve()), path.stat().st_mtime_ns, str(path)
    defaults = _transformer_defaults(resolved, mtime_ns, label)
    if defaults is not None:  # the definition's own values given or not: one network
        seq_len, attention = seq_len or defaults[0], attention or defaults[1]
    return _load(resolved, mtime_ns, label, seq_len, attention)


@functools.lru_cache(maxsize=64)
def _transformer_defaults(resolved: str, mtime_ns: int, label: str
                          ) -> Optional[tuple[int, str]]:
    """A transformer definition's own sequence length and attention where both are valid
    (the network a load that leaves them out builds), else None (a CNN, or a definition whose
    fault its load reports)."""
    try:
        doc = _read_yaml(Path(resolved), label)
    except WorkloadError:
        return None
    config = doc.get("transformer") if isinstance(doc, Mapping) else None
    if not isinstance(config, Mapping):
        return None
    seq_len, attention = config.get("seq_len"), config.get("attention")
    if type(seq_len) is not int or seq_len < 1 or attention not in ATTENTIONS:
        return None
    return seq_len, attention


@functools.lru_cache(maxsize=64)
def _load(resolved: str, mtime_ns: int, label: str, seq_len: int = 0,
          attention: str = "") -> Network:
    doc = _read_yaml(Path(resolved), label)
    return build_network(doc, label, default_name=Path(resolved).stem, seq_len=seq_len,
                         attention=attention)


def _transformer_entries(doc: Mapping, label: str, seq_len: int,
                         attention: str) -> Optional[list]:
    """The expanded layers of a ``transformer:`` document (None for a ``layers:`` one, which
    refuses the transformer options)."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 0:
        raise WorkloadError(f"option seq_len must be a non-negative integer, got {seq_len!r}",
                            file=label)
    if "transformer" not in doc:
        for option, value in (("seq_len", seq_len), ("attention", attention)):
            if value:
                raise WorkloadError(f"option {option} applies to transformer networks only "
                                    "(this file has 'layers')", file=label)
        return None
    if "layers" in doc or "macros" in doc:
        raise WorkloadError("a 'transformer' file has no 'layers' or 'macros'", file=label)
    return expand_transformer(TransformerConfig(doc["transformer"], label, seq_len, attention))


def build_network(doc: Any, label: str, default_name: str = "network", seq_len: int = 0,
                  attention: str = "") -> Network:
    """Build a :class:`Network` from an already parsed YAML document (``label`` names it);
    ``seq_len`` and ``attention`` override a transformer's (see :func:`load_network`)."""
    if not isinstance(doc, Mapping):
        raise WorkloadError("top level must be a mapping with a 'layers' list", file=label)
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise WorkloadError(
            f"unknown top-level key(s) {', '.join(map(repr, unknown))} "
            f"(allowed: {', '.join(sorted(_TOP_KEYS))})", file=label)
    generated = _transformer_entries(doc, label, seq_len, attention)
    entries = doc.get("layers") if generated is None else generated
    if not isinstance(entries, list) or not entries:
        raise WorkloadError("'layers' must be a non-empty list", file=label)
    macros = load_macro_library()
    macros.update(parse_macros(doc.get("macros"), label, set(KINDS)))
    raw_layers, aliases = expand_layers(entries, macros, label)

    layers: list[Layer] = []
    tensor_of: dict[str, str] = {}
    for raw in raw_layers:
        if not NAME_RE.match(raw.name):
            raise WorkloadError(
                "bad layer name (use letters, digits and _ . / + -; ':' '#' '=' are reserved)",
                file=label, layer=raw.name)
        if raw.name in tensor_of or raw.name in aliases:
            raise WorkloadError("duplicate layer name", file=label, layer=raw.name)
        spec = KINDS.get(raw.kind)
        if spec is None:
            raise WorkloadError(
                f"unknown kind '{raw.kind}' (kinds: {', '.join(KINDS)}; macros: "
                f"{', '.join(sorted(macros))})", file=label, layer=raw.name)
        inputs = []
        for ref in raw.inputs:
            target = ref
            for _ in range(len(aliases) + 1):
                if target not in aliases:
                    break
                target = aliases[target]
            if target not in tensor_of:
                raise WorkloadError(f"unknown input '{ref}' (no earlier layer of that name)",
                                    file=label, layer=raw.name)
            inputs.append(target)
        n = len(inputs)
        if n < spec.min_inputs or (spec.max_inputs is not None and n > spec.max_inputs):
            want = (f"{spec.min_inputs}" if spec.max_inputs == spec.min_inputs
                    else f"{spec.min_inputs}..{spec.max_inputs or 'many'}")
            raise WorkloadError(f"kind '{raw.kind}' takes {want} input(s), got {n}",
                                file=label, layer=raw.name)
        try:
            params = normalize_params(spec, raw.params)
        except ValueError as exc:
            raise WorkloadError(f"bad params: {exc}", file=label, layer=raw.name) from None
        in_tensors = tuple(tensor_of[i] for i in inputs)
        tensor = in_tensors[0] if spec.in_place else raw.name
        tensor_of[raw.name] = tensor
        layers.append(Layer(raw.name, raw.kind, tuple(inputs), in_tensors, tensor, params,
                            raw.macro, role_of(raw.name) if generated is not None else ""))
    if all(layer.kind == "data" for layer in layers):
        raise WorkloadError("has data layers only: nothing to compute (an iteration of no "
                            "kernels takes no time, so no speed-up can be measured)", file=label)
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise WorkloadError(f"bad network name {name!r}", file=label)
    return Network(name, layers, file=label, description=str(doc.get("description", "")),
                   source=str(doc.get("source", "")))
