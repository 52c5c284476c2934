"""sweeps/storage_tiers.py, the script docs/storage.md's tables come from (tests/docs/
test_doc_tables.py runs it and compares them with the page): every row is a command the
topology scripts accept, and the cells are the summary's figures."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("storage_tiers",
                                                  REPO / "sweeps" / "storage_tiers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["storage_tiers"] = module
    spec.loader.exec_module(module)
    return module


def test_the_cells_are_the_summarys_figures():
    script = _script()
    summary = {"iteration_time_s": 0.5, "stall_time_s": 0.125, "forward_time_s": 0.1,
               "backward_time_s": 0.2,
               "model_states": {"cpu_step_time_s": 2.0, "cpu_step_alone_s": 1.5}}
    assert script.vgg_cells(summary) == ["500.0 ms", "25.0%"]
    assert script.zero_cells(summary) == ["0.500 s", "0.300 s", "2.000 s (1.500 s)"]


def test_list_prints_every_rows_command(capsys):
    script = _script()
    assert script.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == sum(len(t.rows) for t in script.TABLES)
    assert lines[0].startswith("sst topologies/pascal_cdma.py -- --network vgg16")


def test_a_refused_run_is_one_line_and_a_non_zero_exit(capsys, monkeypatch):
    script = _script()
    bad = script.Table("vgg16", "topologies/pascal_cdma.py", ("--network", "vgg16"),
                       ("--nvme 0 --offload-to nvme",), ("OPTIONS", "x"), script.vgg_cells)
    monkeypatch.setattr(script, "TABLES", (bad,))
    assert script.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("storage_tiers.py: ") and err.count("\n") == 1
