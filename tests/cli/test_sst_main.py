"""The ``sst`` command in this process: malformed model options are one-line errors."""
from __future__ import annotations

import pytest

from sst_cdma import run
from sst_cdma.tools.cli.sst_main import main
from sst_cdma.engine.runner import RunError


@pytest.mark.parametrize("options, fault", [('--size "3', "no closing double quote"),
                                            ('"abc', "no closing double quote")])
def test_a_model_options_string_that_cannot_be_split_is_one_line(repo, capsys, options,
                                                                  fault):
    with pytest.raises(SystemExit) as info:
        main(["--model-options", options, str(repo / "topologies/phold_torus.py")])
    assert info.value.code == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("sst: error: argument --model-options: ") and fault in err
    assert repr(options) in err and "Traceback" not in err


@pytest.mark.parametrize("text, parts", [
    ("--x 1 'y z'", ["--x", "1", "'y", "z'"]),  # single quotes are ordinary characters
    ('--x "y z" a\\b', ["--x", "y z", "a\\b"]),  # double quotes group; backslash is kept
    ('--name=a" "b  c', ["--name=a b", "c"]),
    ("", [])])
def test_model_options_split_as_sst_core_splits_them(text, parts):
    from sst_cdma.tools.cli.sst_main import split_model_options

    assert split_model_options(text) == parts


def test_script_sees_sstsim_x_as_argv0(run_script):
    run_script('import sys\nassert sys.argv[0] == "sstsim.x", sys.argv\nimport sst\n'
               'sst.Component("c", "testElement.StatProbe")\n')


def test_run_refuses_an_unsplittable_model_options_string(repo):
    with pytest.raises(RunError, match="model options \"'abc\": no closing quotation"):
        run(repo / "topologies/phold_torus.py", "'abc")


REFERENCE = "tests/data/sst-core-16"


@pytest.mark.parametrize("how", [["--model-options=--network vgg16 --batch 64"],
                                 ["--", "--network", "vgg16", "--batch", "64"],
                                 ["--model-options=--network vgg16", "--", "--batch", "64"]])
def test_units_probe_prints_what_sst_core_16_prints(repo, capsys, how):
    script = str(repo / REFERENCE / "units_probe.py")
    args = [a for a in how if a.startswith("--model")] + [script] + \
        [a for a in how if not a.startswith("--model")]
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    expected = (repo / REFERENCE / "units_probe.out").read_text().splitlines()[1:]
    # the reference omits SST's final line (it also prints "Simulation is complete ...")
    assert out[:-1] == expected
    assert out[-1].startswith("Simulation is complete")


def _closed_reader(args, tmp_path):
    """Run a console script whose stdout reader has gone away; (status, stderr)."""
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).parent / args[0]
    proc = subprocess.Popen([str(exe), *args[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()  # as `| head` does once it has its lines
    err = proc.stderr.read().decode()
    return proc.wait(timeout=60), err


def test_sst_piped_into_a_closed_reader_is_quiet(write_script, tmp_path):
    script = write_script("""
        import sst
        for i in range(50000):
            print("line", i)
        a = sst.Component("a", "testElement.Echo")
        b = sst.Component("b", "testElement.Echo")
        sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
    """)
    assert _closed_reader(["sst", str(script)], tmp_path) == (0, "")


def test_sst_cdma_piped_into_a_closed_reader_is_quiet(tmp_path):
    assert _closed_reader(["sst-cdma", "--help"], tmp_path) == (0, "")


@pytest.mark.parametrize("argv, model", [
    (["T", "--network", "alexnet"], "--network alexnet"),
    (["--network", "alexnet", "T"], "--network alexnet"),
    (["--stop-at", "1us", "T", "--batch", "8", "--gpu", "volta"], "--batch 8 --gpu volta"),
    (["T", "--mode", "chunk"], "--mode chunk")])  # not an abbreviation of --model-options
def test_model_options_without_double_dash_get_a_hint(repo, capsys, argv, model):
    script = str(repo / "topologies/phold_torus.py")
    with pytest.raises(SystemExit) as info:
        main([script if a == "T" else a for a in argv])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("sst: error: unrecognized arguments: ")
    assert f"(model options go after '--': sst [options] {script} -- {model}; or in " \
           "--model-options)" in err


def test_an_unknown_option_without_a_script_gets_no_hint(capsys):
    with pytest.raises(SystemExit):
        main(["--bogus"])
    assert capsys.readouterr().err == "sst: error: unrecognized arguments: --bogus\n"


def test_sst_option_forms_verbose_level_and_sdl_file(repo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the script writes its statistics to ./
    script = str(repo / REFERENCE / "statistics_example.py")
    assert main(["--verbose=2", f"--sdl-file={script}"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "Simulation is complete, simulated time: 20 ns"
    with pytest.raises(SystemExit):
        main(["--verbose=x", script])
    assert capsys.readouterr().err == "sst: error: argument --verbose: invalid level 'x'\n"
