"""One table per fact: element types, networks, vDNN policies and SST program options are each
declared once, and every list offered elsewhere (params, command lines, profiles, reports)
agrees with the declaration. A scan of the sources (``ast``) finds literal copies."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest

from sst_cdma.model.dtypes import DTYPES, HALF_DTYPES, PROFILE_DTYPES, PROFILE_ITEMSIZES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("sst_cdma", "components", "workloads", "topologies", "benchmarks")


def _sources() -> Iterator[Path]:
    for folder in SOURCES:
        yield from sorted((ROOT / folder).rglob("*.py"))


def literal_lists(source: str) -> Iterator[tuple[int, set[str]]]:
    """(line, strings) of every tuple, list, set or dict (its keys) literal of the source whose
    items include string constants."""
    for node in ast.walk(ast.parse(source)):
        items = node.keys if isinstance(node, ast.Dict) else \
            node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else None
        if items:
            strings = {i.value for i in items
                       if isinstance(i, ast.Constant) and isinstance(i.value, str)}
            if strings:
                yield node.lineno, strings


def copies(table: set[str], least: int, declared_in: str) -> list[str]:
    """``file:line`` of every literal outside ``declared_in`` that lists at least ``least``
    members of ``table``."""
    found = []
    for path in _sources():
        rel = str(path.relative_to(ROOT))
        if rel == declared_in:
            continue
        for line, strings in literal_lists(path.read_text(encoding="utf-8")):
            if len(strings & table) >= min(least, len(table)):
                found.append(f"{rel}:{line}")
    return found


# -- element types ------------------------------------------------------------------------------
def test_the_dtypes_are_declared_once():
    assert copies(set(DTYPES), 3, "sst_cdma/model/dtypes.py") == []


def test_every_list_of_dtypes_is_the_declared_one():
    import workloads
    from components.network_workload import NetworkWorkload
    from components.summary_schema import SUMMARY
    from sst_cdma.codecs import sampling
    from sst_cdma.model import kernel_model
    from sst_cdma.model.gpus import GPUS
    from sst_cdma.profiles import KNOWN_DTYPES
    from sst_cdma.builder.topology import option_parser

    assert kernel_model.DTYPES is DTYPES and workloads.DTYPES is DTYPES
    assert {p.name: p.choices for p in NetworkWorkload.PARAMS}["dtype"] == tuple(DTYPES)
    dtype_option = next(a for a in option_parser("pascal_cdma.py")._actions
                        if "--dtype" in a.option_strings)
    assert dtype_option.metavar == "{" + ",".join(DTYPES) + "}"  # the workload's choices
    assert {t: sampling.itemsize_of(t) for t in sampling.DTYPES} == DTYPES
    assert KNOWN_DTYPES == PROFILE_DTYPES and set(DTYPES) <= set(PROFILE_DTYPES)
    assert all(PROFILE_ITEMSIZES[t] == size for t, size in DTYPES.items())
    assert HALF_DTYPES == tuple(t for t, size in DTYPES.items() if size == 2)
    assert kernel_model.HALF_DTYPES is HALF_DTYPES
    assert all(set(g.tensor_dtypes) <= set(HALF_DTYPES) for g in GPUS.values())
    described = next(k.doc for k in SUMMARY if k.name == "dtype")
    assert all(f"`{t}`" in described for t in DTYPES)


def test_the_workloads_command_line_offers_the_dtypes():
    from sst_cdma.tools.workloads import _parser

    parser = _parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    offered = {tuple(a.choices) for sub in commands.values() for a in sub._actions
               if "--dtype" in a.option_strings}
    assert offered == {tuple(DTYPES)}


# -- networks -----------------------------------------------------------------------------------
def test_the_networks_are_the_network_files():
    from workloads import CNNS, NETWORK_DIR, NETWORKS, TRANSFORMERS
    from workloads.loader import CAPTURE_NETWORKS

    files = {p.stem for p in NETWORK_DIR.glob("*.yaml") if not p.stem.startswith("_")}
    assert set(NETWORKS) | set(CAPTURE_NETWORKS) == files
    assert NETWORKS == CNNS + TRANSFORMERS and not set(CNNS) & set(TRANSFORMERS)
    assert not set(CAPTURE_NETWORKS) & set(NETWORKS)


def test_every_network_file_is_offered():
    from sst_cdma.profiles import derive, estimate
    from workloads import CNNS, NETWORK_DIR, TRANSFORMERS
    from workloads.loader import network_path

    for path in NETWORK_DIR.glob("*.yaml"):
        if not path.stem.startswith("_"):
            assert network_path(path.stem) == path  # --network NAME finds it
    assert estimate.NETWORKS == CNNS and derive.SHIPPED_NETWORKS == TRANSFORMERS


def test_the_network_names_are_listed_once():
    from workloads import NETWORKS
    from workloads.loader import CAPTURE_NETWORKS

    assert copies(set(NETWORKS + CAPTURE_NETWORKS), 3, "workloads/loader.py") == []


def test_the_layer_timing_help_lists_every_network():
    pytest.importorskip("torch")
    from sst_cdma.tools.capture.timing_cli import build_parser
    from workloads import NETWORKS
    from workloads.loader import CAPTURE_NETWORKS

    help_text = next(a.help for a in build_parser()._actions if "--network" in a.option_strings)
    assert all(n in help_text.split() or f"{n}," in help_text.split()
               for n in NETWORKS + CAPTURE_NETWORKS)


# -- vDNN policies ------------------------------------------------------------------------------
def test_the_vdnn_policies_are_declared_once():
    from workloads import POLICIES
    from workloads.policies import VDNN_POLICIES

    from sst_cdma.model import policies

    assert POLICIES is VDNN_POLICIES is policies.VDNN_POLICIES
    assert copies(set(VDNN_POLICIES), 3, "sst_cdma/model/policies.py") == []


def test_the_network_workload_accepts_every_vdnn_policy():
    from components.network_workload import NetworkWorkload
    from workloads.policies import VDNN_POLICIES

    policy = {p.name: p for p in NetworkWorkload.PARAMS}["policy"]
    for name in VDNN_POLICIES:
        assert policy.parse(name) == name


# -- SST program options ------------------------------------------------------------------------
def test_the_graph_files_program_options_are_the_declared_ones():
    from sst_cdma.engine.config import PROGRAM_OPTIONS
    from sst_cdma.engine.graph_files import SST_PROGRAM_OPTIONS

    assert set(SST_PROGRAM_OPTIONS) <= set(PROGRAM_OPTIONS)
    assert {k: v for k, v in SST_PROGRAM_OPTIONS.items() if v != PROGRAM_OPTIONS[k]} == \
        {"partitioner": "sst.single"}


def test_every_sst_command_line_option_is_a_program_option():
    from sst_cdma.tools.cli.sst_main import _parser
    from sst_cdma.engine.config import PROGRAM_OPTIONS, RUN_MODES

    parser = _parser()
    # the command line's, not the run's (SST-core's options a script cannot set)
    own = {"--help", "--usage", "--version", "--sdl-file", "--lib-path", "--add-lib-path",
           "--print-env", "--no-env-config"}
    flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    assert sorted(f for f in flags - own if f[2:] not in PROGRAM_OPTIONS) == []
    mode = next(a for a in parser._actions if "--run-mode" in a.option_strings)
    assert tuple(mode.choices) == RUN_MODES and mode.default == PROGRAM_OPTIONS["run-mode"]
    assert PROGRAM_OPTIONS["run-mode"] in RUN_MODES


def test_the_scan_finds_literal_lists():
    assert list(literal_lists("x = {'a': 1, 'b': 2}\ny = ('c', f(), 'd')")) == \
        [(1, {"a", "b"}), (2, {"c", "d"})]
