"""A pipeline stage's tensor-parallel ranks simulated once: the result records and statistics
of each stage's simulated tp rank 0 (its GPU and every element named under it: the GPU's
subcomponents, HBM, DMA engine, host link, network card), copied for each of the stage's
other tp ranks under their names, so that the summary, the console, the trace and the
statistics report every tp rank as if each had run (docs/parallel.md, "Symmetry").

The builder (:mod:`sst_cdma.builder.pipeline`) names each twin in the reporter's
``tp_twins`` param: entries separated by ``;``, each ``SIM TWIN T [SIMHOST TWINHOST]``, the
simulated GPU's name, its twin's, the twin's tp rank and, where the stage's GPUs have host
memories, the simulated GPU's host and the twin's (a record naming the one names the other
in the twin's copy).

Why the copies are exact: the tp ranks of a stage run the same stream with the same params on
identical elements, their p2p neighbours are their own tp rank's in the next and previous
stage, their collectives over the tp group complete at one time for all of them, each of
their other groups is the same shape on the nodes, and nothing else is shared between them
that carries their traffic (the builder simulates every tp rank where a host socket would);
the engine is deterministic, so every record tp rank ``t`` would publish equals tp rank 0's
but for the element names and the tp rank it holds
(tests/topologies/test_pipeline_tp_twins.py checks it against a run of every rank).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional

from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = ["TpTwin", "parse_tp_twins", "twin_plan", "tp_twin_results"]


@frozen_record
class TpTwin(FrozenRecord):
    """One twin: the simulated GPU's name (``sim``), the twin's (``name``), its tp rank and
    the host names to swap in its records (``hosts``: the simulated GPU's host to the
    twin's)."""

    sim: str
    name: str
    tp_rank: int
    hosts: tuple[tuple[str, str], ...] = ()

    def rename(self, element: str) -> Optional[str]:
        """``element`` (an element of the simulated GPU, or its host) as the twin names it;
        None when it is neither."""
        for old, new in self.hosts:
            if element == old:
                return new
        if element == self.sim:
            return self.name
        if element.startswith(self.sim) and element[len(self.sim)] in ".:":
            return self.name + element[len(self.sim):]
        return None


def parse_tp_twins(text: str) -> dict[str, list[TpTwin]]:
    """The ``tp_twins`` param's twins by simulated GPU, in order; ValueError naming a
    malformed entry."""
    out: dict[str, list[TpTwin]] = {}
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        words = entry.split()
        if len(words) not in (3, 5) or not words[2].isdigit():
            raise ValueError(f"tp twin {entry!r} is not 'SIM TWIN T [SIMHOST TWINHOST]' with T "
                             "a tp rank")
        hosts = ((words[3], words[4]),) if len(words) == 5 else ()
        out.setdefault(words[0], []).append(TpTwin(words[0], words[1], int(words[2]), hosts))
    return out


def _owner(name: str, twins: Mapping[str, list[TpTwin]]) -> Optional[str]:
    """The simulated GPU whose element ``name`` is (its own name, or one under it)."""
    gpu = name.split(".", 1)[0].split(":", 1)[0]
    return gpu if gpu in twins else None


def twin_plan(names: Iterable[str],
              twins: Mapping[str, list[TpTwin]]) -> list[tuple[str, Optional[TpTwin]]]:
    """``(name, twin)`` for every element of a run of every tp rank, from the simulated
    ``names`` in their order, in the order a run of every tp rank declares its elements: each
    simulated GPU's elements (and whatever was declared among them), then each twin's copies
    of them, before the next GPU's; ``twin`` None for an element that is its own. A
    simulated GPU's host declared among its elements (the GPU was its socket's first) stands
    at the same place in a twin's copy for the twin's host, where that is another element of
    ``names`` not placed yet (the twin is its own socket's first)."""
    order = list(names)
    known = set(order)
    hosts = [pair for ts in twins.values() for t in ts for pair in t.hosts]
    twins_only = {new for _, new in hosts} - {old for old, _ in hosts}
    out: list[tuple[str, Optional[TpTwin]]] = []
    placed: set[str] = set()
    block: list[str] = []
    deferred: list[str] = []
    current: Optional[str] = None

    def close() -> None:
        for twin in twins.get(current or "", ()):
            for name in block:
                if _owner(name, twins) == current:
                    out.append((name, twin))
                    continue
                host = twin.rename(name)
                if host is not None and host in known and host not in placed:
                    out.append((host, None))
                    placed.add(host)
        out.extend((name, None) for name in deferred if name not in placed)
        placed.update(deferred)
        block.clear()
        deferred.clear()

    for name in order:
        owner = _owner(name, twins)
        if owner is not None and owner != current:
            close()
            current = owner
        if name in twins_only and name not in placed:
            deferred.append(name)  # a twin's socket: where the twin's copy declares it
            continue
        if name in placed:
            continue
        out.append((name, None))
        placed.add(name)
        if current is not None:
            block.append(name)
    close()
    return out


def _renamed(value: Any, names: frozenset[str], twin: TpTwin) -> Any:
    """``value`` (a record's field) with each element name in it, alone or as an item of a
    list or tuple or a value of a dict, as the twin names it; anything else unchanged (and
    not copied: a record's long lists of figures are shared, not walked twice)."""
    if isinstance(value, str):
        new = twin.rename(value) if value in names else None
        return value if new is None else new
    if isinstance(value, (list, tuple)) and any(isinstance(v, str) and v in names
                                                for v in value):
        return type(value)(_renamed(v, names, twin) if isinstance(v, str) else v
                           for v in value)
    if isinstance(value, dict) and any(isinstance(v, str) and v in names
                                       for v in value.values()):
        return {k: _renamed(v, names, twin) if isinstance(v, str) else v
                for k, v in value.items()}
    return value


def _twin_record(record: Any, names: frozenset[str], twin: TpTwin) -> Any:
    """``record`` as the twin publishes it: the same, but for element names and its
    ``tp_rank`` (a field of the records that carry their rank's coordinates)."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return record
    changed: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        new = twin.tp_rank if f.name == "tp_rank" else _renamed(value, names, twin)
        if new is not value:
            changed[f.name] = new
    if any(f.name == "twin_of" for f in dataclasses.fields(record)):
        changed["twin_of"] = twin.sim
    return dataclasses.replace(record, **changed) if changed else record


def tp_twin_results(results: Mapping[str, Any], twins: Mapping[str, list[TpTwin]],
                    element_names: Iterable[str] = ()) -> dict[str, Any]:
    """The records of a run of every tp rank from those of the simulated ones (``results``,
    by element name), in the order such a run publishes them (:func:`twin_plan`).
    ``element_names`` are the simulated elements' names, which a record may hold; the twins'
    hosts are names too."""
    hosts = {new for ts in twins.values() for t in ts for _, new in t.hosts}
    names = frozenset(element_names) | frozenset(results) | hosts
    out: dict[str, Any] = {}
    for name, twin in twin_plan(results, twins):
        if twin is None:
            out[name] = results[name]
        else:
            out[twin.rename(name) or name] = _twin_record(results[name], names, twin)
    return out
