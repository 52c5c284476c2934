"""Identical, independent nodes simulated once: the result records of the one node simulated
(node 0), copied for each of its twins under the twins' names, so that the summary, the
console and the trace report every GPU of the system as if every node had run.

A node is a host with its GPUs, their engines, host links and switches, its host CPU and
drives, and each baseline system's copies of them; :func:`sst_cdma.builder.topology.build`
simulates node 0 alone where the nodes share nothing (docs/topologies.md, "Identical nodes").
Node ``k``'s elements are named as node 0's with each numbered word (``gpu3``, ``host0``,
``switch1``, ``cpu0``) advanced by ``k`` times that word's stride, the count of such elements
a node holds: ``gpu3.pcie`` of a node of eight GPUs is ``gpu11.pcie`` on node 1.

Why the copies are exact: node ``k`` runs the same elements with the same params on the same
workload as node 0 and exchanges no event with any other node, and the engine is
deterministic, so every record node ``k`` would publish equals node 0's but for the element
names it holds (tests/components/test_node_twins.py checks it against a run of every node).
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Iterable, Mapping

__all__ = ["NODE_WORD", "parse_strides", "twin_name", "twin_plan", "node_twin_results"]

#: a numbered word of an element's name that counts elements of one kind across the nodes
NODE_WORD = re.compile(r"(?<![A-Za-z0-9_])(gpu|host|cpu|switch)(\d+)(?![0-9])")


def parse_strides(text: str) -> dict[str, int]:
    """``"gpu:8 host:1"`` as ``{"gpu": 8, "host": 1}``; ValueError naming a malformed entry."""
    out: dict[str, int] = {}
    for entry in text.replace(",", " ").split():
        word, _, count = entry.partition(":")
        if word not in ("gpu", "host", "cpu", "switch") or not count.isdigit():
            raise ValueError(f"node stride {entry!r} is not WORD:COUNT with WORD one of gpu, "
                             "host, cpu, switch")
        out[word] = int(count)
    return out


def twin_name(name: str, node: int, strides: Mapping[str, int]) -> str:
    """``name`` of node 0's element as node ``node`` names its twin."""
    if node == 0:
        return name
    return NODE_WORD.sub(lambda m: f"{m[1]}{int(m[2]) + node * strides.get(m[1], 0)}", name)


def _block(name: str) -> str:
    """The part of ``name`` before its first numbered word (``oracle.`` for
    ``oracle.gpu3.hbm``), or the whole name when it has none: records of one block are
    declared node after node."""
    m = NODE_WORD.search(name)
    return name if m is None else name[:m.start()]


def _renamed(value: Any, names: frozenset[str], node: int, strides: Mapping[str, int]) -> Any:
    """``value`` (a record field) with each element name in it, alone or in a list or
    tuple, replaced by its twin's; anything else unchanged (and not copied)."""
    if isinstance(value, str):
        return twin_name(value, node, strides) if value in names else value
    if isinstance(value, (list, tuple)) and any(isinstance(v, str) and v in names
                                                for v in value):
        return type(value)(_renamed(v, names, node, strides) for v in value)
    return value


def _twin_record(record: Any, names: frozenset[str], node: int,
                 strides: Mapping[str, int]) -> Any:
    """``record`` as node ``node``'s twin publishes it: the same, but for element names."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return record
    changed = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        new = _renamed(value, names, node, strides)
        if new is not value:
            changed[f.name] = new
    return dataclasses.replace(record, **changed) if changed else record


def twin_plan(names: Iterable[str], nodes: int,
              strides: Mapping[str, int]) -> list[tuple[str, int]]:
    """``(name, node)`` for every element of a run of ``nodes`` nodes, from node 0's element
    ``names`` in the order the simulation declared them, in the order a run of every node
    declares theirs: each block of node 0's names (the main system's, then each baseline's)
    followed by its twins', node by node. An element outside any node (no numbered word in
    its name) is there once, for node 0."""
    out: list[tuple[str, int]] = []
    for _, group in itertools.groupby(names, key=_block):
        run = list(group)
        for node in range(nodes if NODE_WORD.search(run[0]) else 1):
            out.extend((name, node) for name in run)
    return out


def node_twin_results(results: Mapping[str, Any], nodes: int, strides: Mapping[str, int],
                      element_names: Iterable[str] = ()) -> dict[str, Any]:
    """The records of a run of ``nodes`` nodes from those of its node 0 (``results``, by
    element name), in the order a run of every node publishes them (:func:`twin_plan`).
    ``element_names`` are the simulated elements' names, which a record may hold (the GPU an
    engine served, the links on its path)."""
    names = frozenset(element_names) | frozenset(results)
    return {twin_name(name, node, strides): _twin_record(results[name], names, node, strides)
            for name, node in twin_plan(results, nodes, strides)}
