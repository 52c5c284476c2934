"""The baselines follow the main system's workload (issue #24): a main GPU's workload param
changed after :func:`add_baselines` copied it (a param override, an ``addParam`` after the
copies were made) is refused with one line unless the copies got it too."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
SMALL = ["--network", "alexnet", "--batch", "32"]
WORKLOADS = ("gpu0:workload[0]", "oracle.gpu0:workload[0]", "vdnn.gpu0:workload[0]")


def refused(script: Path, opts: list[str], **kwargs) -> str:
    """The one-line refusal of a run."""
    with pytest.raises(RunError) as err:
        sst_cdma.run(script, opts, console=io.StringIO(), **kwargs)
    text = str(err.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("param,value", [("batch", "64"), ("network", "vgg16")])
def test_an_override_of_the_main_workload_alone_is_refused(param, value):
    text = refused(PASCAL, SMALL, overrides={WORKLOADS[0]: {param: value}})
    assert f"gpu0:workload[0]: workload param {param!r} was set to {value!r} (param override)" \
        in text
    assert "'oracle.gpu0:workload[0]' and 'vdnn.gpu0:workload[0]' too" in text


def test_an_override_every_system_shares_runs_with_the_baselines_on_it():
    result = sst_cdma.run(PASCAL, SMALL, console=io.StringIO(),
                          overrides={name: {"batch": "16"} for name in WORKLOADS})
    summary = result.reports["summary"]
    base = sst_cdma.run(PASCAL, ["--network", "alexnet", "--batch", "16"],
                        console=io.StringIO()).reports["summary"]
    assert summary["baselines"] == base["baselines"]
    assert summary["iteration_time_s"] == base["iteration_time_s"]


def test_main_only_hardware_overrides_still_run():
    # the documented way to give only the main system another memory
    sst_cdma.run(PASCAL, SMALL, console=io.StringIO(),
                 overrides={"gpu0.hbm": {"bandwidth": "500GB/s"}})


def test_add_param_after_the_baselines_were_added_is_refused(tmp_path):
    hand = (REPO / "topologies" / "hand_wired_p100.py").read_text(encoding="utf-8")
    assert "add_baselines()\n" in hand
    script = tmp_path / "late.py"
    script.write_text(hand.replace('"network": "vgg16", "batch": 64',
                                   '"network": "alexnet", "batch": 32')
                      + '\nworkload.addParam("batch", 128)\n', encoding="utf-8")
    text = refused(script, [])
    assert "workload param 'batch' was set to '128' (" in text and "still has '32'" in text
