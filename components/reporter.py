"""The run reporter (``cdma.Reporter``): at the end of the run it wires three modules
together. The report reads only the typed result records the elements published (GPUResult,
EngineResult, LinkResult, AllReduceResult): :mod:`components.summary` composes the summary from
them, :mod:`components.trace` draws the Chrome trace from the GPUs' records, and
:mod:`components.console` formats the composed summary. It writes ``summary.json`` and
``trace.json`` into the run's output folder.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Component, Param
from sst_cdma.engine.json_text import indented

from .console import console_summary
from .summary import SystemResults, compose_summary


class Reporter(Component):
    """Writes the run's summary: console text, summary.json and trace.json, composed from the
    result records the GPUs, engines and links published."""

    FINISH_LAST = True
    PARAMS = (
        Param("console", "bool", "true", "print the summary on standard output"),
        Param("trace", "bool", "true", "write trace.json (Chrome trace format) with the output"),
        Param("system", "str", "", "a one-line description of the simulated system (default: "
              "composed from the GPUs' presets and the host link)"),
        Param("statistics_need_folder", "bool", "false",
              "write the statistic file only into the run's output folder, where it has one; "
              "without one the statistics stay in memory, as the cDMA topologies write theirs "
              "only where there is a folder for them (a graph saved from one keeps the rule)"),
        Param("nodes", "int", 1, "identical, independent nodes the simulated node 0 stands "
              "for: its records are copied for the other nodes under their names "
              "(components.node_twins) before the summary is composed", minimum=1,
              why_minimum="at least the node simulated"),
        Param("node_strides", "str", "", "with nodes above 1: how many of each numbered "
              "element a node holds, as WORD:COUNT pairs (gpu:8 host:1 cpu:1 switch:4)"),
        Param("tp_twins", "str", "", "a pipeline's tensor-parallel ranks not simulated, each "
              "standing in for by its stage's simulated tp rank 0: 'SIM TWIN T [SIMHOST "
              "TWINHOST]' entries separated by ';', whose records and statistics are copied "
              "under the twin's names (components.rank_twins) before the summary is composed"),
    )

    def __init__(self, simulation: Any, name: str, params: Mapping[str, Any]) -> None:
        super().__init__(simulation, name, params)
        if self.params["statistics_need_folder"] and simulation.output_directory is None:
            simulation.statistics.keep_in_memory()

    def _copy_node_twins(self) -> None:
        """Every node's records in the run's results, and its statistics in their output,
        from node 0's (the one simulated)."""
        from .node_twins import node_twin_results, parse_strides, twin_name, twin_plan

        try:
            strides = parse_strides(self.params["node_strides"])
        except ValueError as exc:
            raise ConfigError(f"{self.name}: param node_strides: {exc}") from None
        nodes, names = self.params["nodes"], [el.name for el in self.simulation.elements()]
        results = self.simulation.results
        twins = node_twin_results(results, nodes, strides, names)
        results.clear()
        results.update(twins)
        self.simulation.statistics.copy_statistics(
            [(name, twin_name(name, node, strides))
             for name, node in twin_plan(names, nodes, strides)])

    def _copy_tp_twins(self) -> None:
        """Every tp rank's records in the run's results, and its statistics in their output,
        from its stage's simulated tp rank's."""
        from . import rank_twins

        try:
            twins = rank_twins.parse_tp_twins(self.params["tp_twins"])
        except ValueError as exc:
            raise ConfigError(f"{self.name}: param tp_twins: {exc}") from None
        names = [el.name for el in self.simulation.elements()]
        results = self.simulation.results
        copied = rank_twins.tp_twin_results(results, twins, names)
        results.clear()
        results.update(copied)
        statistics = self.simulation.statistics
        registered = list(dict.fromkeys(stat.component for stat in statistics.stats))
        statistics.copy_statistics(
            [(name, name if twin is None else twin.rename(name) or name)
             for name, twin in rank_twins.twin_plan(registered, twins)])

    def finish(self) -> None:
        """Build the summary and write it where the run asked."""
        if self.params["nodes"] > 1:
            self._copy_node_twins()
        if self.params["tp_twins"]:
            self._copy_tp_twins()
        try:
            runs = SystemResults(self.simulation.results)
        except ConfigError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None
        if not runs.main:
            return
        summary = compose_summary(runs, self.params["system"], self.sim.now)
        self.simulation.reports["summary"] = summary
        if self.params["console"]:
            print(console_summary(summary), file=self.simulation.console)
        out = self.simulation.output_directory
        if out is not None:
            # (json.dumps(summary, indent=2, sort_keys=True)'s text, in a fraction of its time)
            text = indented(summary, 2, sort_keys=True) + "\n"
            (out / "summary.json").write_text(text, encoding="utf-8")
            # the text as written, for a caller that embeds it (a sweep point's result.json)
            self.simulation.reports["summary.json"] = text
            if self.params["trace"]:
                from .trace import chrome_trace, parallel_records

                (out / "trace.json").write_text(json.dumps(chrome_trace(
                    runs.gpus, self.simulation.full_trace,
                    parallel_records(self.simulation.results))) + "\n",
                                                encoding="utf-8")
