"""The ``sst`` command in this process: malformed model options are one-line errors."""
from __future__ import annotations

import pytest

from sst_cdma import run
from sst_cdma.cli.sst_main import main
from sst_cdma.runner import RunError


@pytest.mark.parametrize("options, fault", [("'abc", "no closing quotation"),
                                            ('--size "3', "no closing quotation"),
                                            ("--size 3 \\", "no escaped character")])
def test_a_model_options_string_that_cannot_be_split_is_one_line(repo, capsys, options,
                                                                  fault):
    with pytest.raises(SystemExit) as info:
        main(["--model-options", options, str(repo / "topologies/phold_torus.py")])
    assert info.value.code == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("sst: error: argument --model-options: ") and fault in err
    assert repr(options) in err and "Traceback" not in err


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
