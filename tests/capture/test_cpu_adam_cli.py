"""``sst-cdma time-cpu-adam``: a tiny measurement writes a file the loader reads, and bad
options are one line before anything is timed."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from sst_cdma.tools.capture.cpu_adam_cli import main  # noqa: E402
from sst_cdma.tools.capture.cpu_adam_timing import time_cpu_adam  # noqa: E402
from sst_cdma.model.cpu_adam import IMPLEMENTATIONS, load_cpu_adam  # noqa: E402


def test_a_tiny_run_writes_a_file_the_loader_reads(tmp_path, capsys):
    out = tmp_path / "adam.json"
    assert main(["--sizes", "1Ki,4Ki", "--threads", "1", "--repeat", "2", "--warmup", "0",
                 "--tensors", "3", "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    measured = {m["implementation"] for m in doc["measurements"]}
    assert measured | set(doc.get("unavailable", {})) == set(IMPLEMENTATIONS)
    assert {m["params"] for m in doc["measurements"]} == {1024, 4096}
    assert all(m["threads"] == 1 and m["tensors"] == 3 and len(m["seconds"]) == 2
               for m in doc["measurements"])
    assert doc["command"].startswith("sst-cdma time-cpu-adam --sizes 1Ki,4Ki")
    profile = load_cpu_adam(out)
    assert profile.size_params == 4096 and profile.cores_measured == 1
    assert profile.params_per_s_per_core == profile.params_per_s_all_cores
    assert "wrote" in capsys.readouterr().out


def test_the_step_updates_the_weights_and_their_16_bit_copy():
    timings, unavailable = time_cpu_adam([100], [1], ["for-loop"], tensors=2, repeat=1,
                                         warmup=0)
    assert [t.params for t in timings] == [100] and unavailable == {}
    assert timings[0].params_per_s == 100 / timings[0].min_s <= 100 / timings[0].median_s


@pytest.mark.parametrize("argv,message", [
    (["--sizes", "1Ki,x"], "--sizes: 'x' is not a positive whole number of parameters"),
    (["--sizes", "1.5"], "--sizes: '1.5' is not a positive whole number"),
    (["--threads", "0"], "--threads: '0' is not a positive whole number or 'all'"),
    (["--implementations", "avx512"], "--implementations: 'avx512' is not one of"),
    (["--repeat", "0"], "--repeat: must be at least 1, got 0"),
    (["--tensors", "0"], "--tensors: must be at least 1, got 0"),
    # counts past what this machine runs: a segfault, an allocator traceback, a run of years
    (["--threads", "100000"], "--threads: 100000 is more than the"),
    (["--threads", "9" * 5000], "is more than the"),
    (["--sizes", "1e15"], "--sizes: 1e15 needs at least"),
    (["--repeat", "1000000000"], "--repeat: must be at most 1000"),
    (["--tensors", "1000000000"], "--tensors: must be at most 65536"),
    ([], "one of the arguments --output/-o --write-default is required"),
])
def test_bad_options_are_one_line(tmp_path, capsys, argv, message):
    out = ["--output", str(tmp_path / "x.json")] if argv else []
    assert main(argv + out) == 2
    err = capsys.readouterr().err
    assert err.startswith("sst-cdma time-cpu-adam: error: ") and message in err
    assert err.count("\n") == 1 and not (tmp_path / "x.json").exists()


def test_an_output_in_a_missing_folder_is_refused(tmp_path, capsys):
    assert main(["--output", str(tmp_path / "no" / "x.json")]) == 2
    assert "--output: folder" in capsys.readouterr().err
