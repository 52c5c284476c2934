"""One run of every model option family (``--optimizer-states host|nvme``, ``--weights``,
``--offload-to nvme``, ``--engine blackwell-de``, ``--grad-accum``, data parallel) through
``sst --output-directory``, and what it wrote opened as a user would: summary.json and
trace.json parsed as JSON, the statistics CSV read back (issue #34: an
``--optimizer-states nvme`` run printed its summary, then died on the Chrome trace with no
output folder). Every event of the trace lies on a thread with a name."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.model_state_driver import COPY_STREAMS
from components.trace import TRACK_OF, TRACKS
from sst_cdma import read_statistics
from sst_cdma.tools.cli.sst_main import main

REPO = Path(__file__).resolve().parents[2]
ADAM = ["--network", "digits_cnn", "--batch", "16", "--dtype", "float16", "--optimizer",
        "adam", "--no-baselines"]

#: family -> (topology, model options, the timeline kinds the trace must draw)
FAMILIES = {
    "optimizer-states-host": ("pascal_cdma.py", [*ADAM, "--optimizer-states", "host"],
                              {"compute", "gradients", "weights", "cpu"}),
    "optimizer-states-nvme": ("pascal_cdma.py", [*ADAM, "--optimizer-states", "nvme",
                                                 "--nvme", "1"],
                              {"compute", "gradients", "weights", "states_in", "states_out",
                               "cpu"}),
    "weights-nvme": ("pascal_cdma.py", [*ADAM, "--optimizer-states", "nvme", "--weights",
                                        "nvme", "--nvme", "1"],
                     {"compute", "prefetch", "gradients", "weights", "states_in", "states_out",
                      "cpu"}),
    "weights-host": ("pascal_cdma.py", [*ADAM, "--optimizer-states", "host", "--weights",
                                        "host"], {"compute", "prefetch", "gradients", "cpu"}),
    "offload-to-nvme": ("pascal_cdma.py", ["--network", "digits_cnn", "--batch", "16",
                                           "--policy", "all", "--no-baselines", "--nvme", "1",
                                           "--offload-to", "nvme"],
                        {"compute", "offload", "prefetch"}),
    "blackwell-de": ("gb200_cdma.py", ["--network", "digits_cnn", "--batch", "16", "--policy",
                                       "all", "--no-baselines", "--engine", "blackwell-de"],
                     {"compute", "offload", "prefetch"}),
    "grad-accum": ("pascal_cdma.py", [*ADAM, "--grad-accum", "2"], {"compute"}),
    "data-parallel": ("pascal_cdma.py", ["--network", "digits_cnn", "--batch", "16", "--gpus",
                                         "2", "--data-parallel", "--no-baselines"],
                      {"compute"}),
}


def test_every_copy_stream_of_the_model_states_has_a_named_thread():
    names = [name for name, _ in TRACKS]
    assert len(set(names)) == len(names)
    for stream in COPY_STREAMS:
        assert stream in TRACK_OF
    assert {"compute", "offload", "prefetch", "stall", "cpu"} <= set(TRACK_OF)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_run_of_each_family_writes_outputs_that_open(family, tmp_path, capsys):
    script, options, kinds = FAMILIES[family]
    out = tmp_path / "out"
    assert main(["--output-directory", str(out), str(REPO / "topologies" / script), "--",
                 *options]) == 0
    captured = capsys.readouterr()
    assert "internal error" not in captured.err, captured.err
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["iteration_time_s"] > 0
    stats = read_statistics(out / "StatisticOutput.csv")
    assert len(stats) > 0 and "gpu0" in set(stats["ComponentName"])
    trace = json.loads((out / "trace.json").read_text(encoding="utf-8"))["traceEvents"]
    named = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace
             if e["name"] == "thread_name"}
    spans = [e for e in trace if e["ph"] == "X"]
    assert {e["cat"] for e in spans} >= kinds
    for e in spans:  # every event on a thread with a name
        assert (e["pid"], e["tid"]) in named, e
    # the thread's name is that of the track its kind is drawn on
    for e in spans:
        assert named[e["pid"], e["tid"]] == TRACKS[TRACK_OF[e["cat"]] - 1][0]
