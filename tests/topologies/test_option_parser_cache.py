"""The model options' parser is made once per process for each topology's defaults and reused
by every run (a sweep's points): reuse changes no parse, and a parser made before a preset or a
codec was registered is not reused after."""
from __future__ import annotations

from pathlib import Path

import sst_cdma.builder.topology as topology
from sst_cdma.engine.graph_files import to_json
from sst_cdma.engine.runner import execute_script

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
DEFAULTS = (("gpus_per_switch", 0), ("gpus_per_host", 0), ("data_parallel", False))


def _parser() -> topology.ModelOptionParser:
    return topology._cached_parser("pascal_cdma.py", "pascal", None, 1, "ddr4-2400-socket",
                                   DEFAULTS, topology._parser_inputs())


def test_one_parser_serves_every_parse_and_a_parse_leaves_no_value_behind():
    parser = _parser()
    assert _parser() is parser
    given = parser.parse_args(["--gpus", "4", "--algorithm", "rle", "--batch", "32"])
    again = parser.parse_args([])
    assert (given.gpus, given.algorithm, given.batch) == (4, "rle", 32)
    assert again.gpus == 1 and again.algorithm == "zvc" and again.batch != 32
    assert again.gpus_per_switch == 0 and again.data_parallel is False


def test_other_defaults_or_another_preset_registered_make_another_parser(monkeypatch):
    parser = _parser()
    other = topology._cached_parser("pascal_cdma.py", "pascal", None, 1, "ddr4-2400-socket",
                                    (("gpus_per_switch", 4),) + DEFAULTS[1:],
                                    topology._parser_inputs())
    assert other is not parser and other.parse_args([]).gpus_per_switch == 4
    monkeypatch.setitem(topology.GPUS, "pascal-twin", topology.GPUS["pascal"])
    fresh = _parser()
    assert fresh is not parser
    assert fresh.parse_args(["--gpu", "pascal-twin"]).gpu == "pascal-twin"


def test_runs_of_a_topology_through_the_cached_parser_are_those_of_fresh_parsers(monkeypatch):
    options = (["--network", "alexnet", "--algorithm", "rle"], ["--network", "vgg16"],
               ["--network", "alexnet", "--algorithm", "rle"])
    cached = [to_json(execute_script(PASCAL, argv)) for argv in options]
    monkeypatch.setattr(topology, "_cached_parser", topology._cached_parser.__wrapped__)
    fresh = [to_json(execute_script(PASCAL, argv)) for argv in options]
    assert cached == fresh
    assert cached[0] == cached[2] != cached[1]
