"""What docs/ quotes of the code is what the code has: the messages docs/host_cpu.md quotes are
the lines ``sst-cdma time-cpu-adam`` prints, the ``run_sweep`` signature and ``SweepOutcome``
fields docs/sweeps.md lists are the code's, and what docs/model.md calls modelled of the model
states is an option and a module that exist."""
from __future__ import annotations

import dataclasses
import json
import importlib.util
import inspect
import re
from pathlib import Path

from doc_tables import REPO

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.builder.model_options import ELEMENT_OPTIONS, option_param
from sst_cdma.tools.sweep import run_sweep
from sst_cdma.tools.sweep.driver import SweepOutcome


def _page(name: str) -> str:
    return (REPO / "docs" / name).read_text(encoding="utf-8")


def _quoted_after(text: str, words: str) -> str:
    """The first `...` quote after ``words``, its line breaks read as spaces."""
    match = re.search(re.escape(words) + r"[^`]*`([^`]+)`", text)
    assert match, words
    return " ".join(match.group(1).split())


def test_the_line_host_cpu_md_quotes_without_pytorch_is_what_time_cpu_adam_prints(
        monkeypatch, capsys, tmp_path):
    quoted = _quoted_after(_page("host_cpu.md"), "Without PyTorch the command is one line,")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["time-cpu-adam", "--output", str(tmp_path / "host.json")]) == 1
    assert capsys.readouterr().err == quoted + "\n"
    assert not (tmp_path / "host.json").exists()


def test_the_bad_option_line_host_cpu_md_quotes_is_what_time_cpu_adam_prints(tmp_path, capsys,
                                                                            monkeypatch):
    quoted = _quoted_after(_page("host_cpu.md"), "A bad option is one line,")
    bad = re.search(r"(--\w+): '([^']*)'", quoted)
    assert bad, quoted
    monkeypatch.chdir(tmp_path)
    code = main(["time-cpu-adam", bad.group(1), bad.group(2), "--output",
                 str(tmp_path / "host.json")])
    assert (code, capsys.readouterr().err) == (2, quoted + "\n")


def test_sweeps_md_lists_the_fields_of_sweep_outcome():
    listed = _quoted_after(_page("sweeps.md"), "`SweepOutcome` has the fields")
    assert listed.split(", ") == [f.name for f in dataclasses.fields(SweepOutcome)]


def test_sweeps_md_gives_run_sweeps_signature():
    text = " ".join(_page("sweeps.md").split())
    match = re.search(r"`sst_cdma\.tools\.sweep\.run_sweep\(([^)]*)\) -> SweepOutcome`", text)
    assert match
    documented = [p.strip().split("=") for p in match.group(1).split(",")]
    params = inspect.signature(run_sweep).parameters
    assert [p[0] for p in documented] == list(params)
    for name, *default in documented:
        if default:
            assert default[0] == repr(params[name].default), name


def test_what_model_md_calls_modelled_of_the_model_states_exists():
    text = _page("model.md").split("## What is not modelled", 1)[1].split("\n## ", 1)[0]
    modelled = " ".join(text.split("Modelled, by contrast:", 1)[1].split())
    assert "--state-compression engine|host" in modelled
    option = next(o for o in ELEMENT_OPTIONS if o.flag == "--state-compression")
    assert {"engine", "host"} <= set(option_param(option).choices or ())
    assert "workloads/state_planner.py" in modelled
    assert (REPO / "workloads" / "state_planner.py").is_file()
    unmodelled = " ".join(text.split("Modelled, by contrast:", 1)[0].split())
    assert "compression of model states" not in unmodelled
    assert "plans activations only" not in unmodelled


def _shown(cell: str) -> tuple[float, int]:
    """A table cell's number and its decimals (``**511**`` -> (511.0, 0), ``0.62 ms`` ->
    (0.62, 2))."""
    number = re.search(r"[\d.]+", cell.replace("*", ""))
    assert number, cell
    text = number.group(0)
    return float(text), len(text.split(".")[1]) if "." in text else 0


def test_host_cpu_mds_measurement_table_is_the_shipped_files():
    from doc_tables import page_tables

    from sst_cdma.model.cpu_adam import DEFAULT_CPU_ADAM

    doc = json.loads(DEFAULT_CPU_ADAM.read_text(encoding="utf-8"))
    units = {"Ki": 1024, "Mi": 1024 ** 2}
    (table,) = [t for t in page_tables(REPO / "docs" / "host_cpu.md")
                if t.heading == "The shipped default: measured here"]
    assert table.rows[0] == ("implementation", "params", "threads", "fastest step",
                             "M parameters/s")
    for implementation, params, threads, step, rate in table.rows[1:]:
        count, unit = params.split()
        (m,) = [m for m in doc["measurements"]
                if (f"`{m['implementation']}`", m["params"], m["threads"])
                == (implementation, int(count) * units[unit], int(threads))]
        ms, decimals = _shown(step)
        assert round(m["min_s"] * 1e3, decimals) == ms, (implementation, params, threads)
        per_s, decimals = _shown(rate)
        assert round(m["params_per_s"] / 1e6, decimals) == per_s, (implementation, params)
    assert len(doc["measurements"]) == 18 and "all 18 measurements" in _page("host_cpu.md")


def test_host_cpu_mds_deepspeed_table_is_the_committed_files():
    from doc_tables import page_tables

    from sst_cdma.model.cpu_adam import load_cpu_adam

    path = REPO / "sst_cdma" / "model" / "calibration_data" / "cpu_adam" / \
        "xeon_avx512_deepspeed.json"
    load_cpu_adam(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    units = {"Ki": 1024, "Mi": 1024 ** 2}
    (table,) = [t for t in page_tables(REPO / "docs" / "host_cpu.md")
                if t.heading == "DeepSpeed's CPU Adam, measured here"]
    assert table.rows[0] == ("implementation", "params", "threads", "fastest step",
                             "median step", "M parameters/s")
    for implementation, params, threads, step, median, rate in table.rows[1:]:
        count, unit = params.split()
        (m,) = [m for m in doc["measurements"]
                if (f"`{m['implementation']}`", m["params"], m["threads"])
                == (implementation, int(count) * units[unit], int(threads))]
        for shown, value in ((step, m["min_s"] * 1e3), (median, m["median_s"] * 1e3),
                             (rate, m["params_per_s"] / 1e6)):
            number, decimals = _shown(shown)
            assert round(value, decimals) == number, (implementation, params, threads)
    count = len(doc["measurements"])
    assert f"all {count} measurements" in _page("host_cpu.md")
    assert "deepspeed" in doc["optimizers"] and doc["machine"]["simd"]


def test_the_warnings_host_cpu_md_quotes_are_what_the_model_says():
    from sst_cdma.model.hosts import PLATFORMS, adam_origin

    page = _page("host_cpu.md")
    h100 = PLATFORMS["dgx-h100"]
    for name, cpu, bits, mhz in (("mine.json", "AMD Ryzen 9 7950X", 0, 0.0),
                                 ("xeon.json", "Intel(R) Xeon(R) Processor", 512, 2599.998),
                                 ("epyc.json", "AMD EPYC 7742 64-Core Processor", 0, 0.0)):
        note = adam_origin(cpu, False, h100, bits, mhz).note(f"--cpu-adam-file {name}")
        assert f"    sst: warning: {note}\n" in page, note


def test_sweeps_md_lists_every_shipped_spec_with_its_topologies():
    from doc_tables import page_tables

    from sst_cdma.tools.sweep import load_spec

    (table,) = [t for t in page_tables(REPO / "docs" / "sweeps.md")
                if t.heading.startswith("7. Shipped specs")]
    rows = {spec.strip("`"): topology for spec, topology, _ in table.rows[1:]}
    assert sorted(rows) == sorted(p.name for p in (REPO / "sweeps").glob("*.yaml"))
    for name, shown in rows.items():
        scripts = {Path(p.topology).stem for p in load_spec(REPO / "sweeps" / name).points}
        stems = {s.strip().removesuffix(".py") for s in shown.replace(" _cdma", "").split("/")}
        assert {s.removesuffix("_cdma") for s in scripts} == \
            {s.removesuffix("_cdma") for s in stems}, name
