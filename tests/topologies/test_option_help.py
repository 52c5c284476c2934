"""The model options' help shows no empty choice (``--attention {,naive,...}``) and says what an
unset option means; ``--gpu`` takes the products' names of the presets named for their
architecture (``h100`` is ``hopper``)."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.model.gpus import GPU_ALIASES, GPUS, gpu_preset
from sst_cdma.builder.topology import option_parser

REPO = Path(__file__).resolve().parents[2]


def help_text() -> str:
    return option_parser("pascal_cdma.py", "pascal", None, 1).format_help()


def test_no_choice_list_shows_an_empty_choice():
    text = help_text()
    assert re.findall(r"\{,|,,|,\}", text) == []
    assert "--attention {naive,flash2,flash3,fused}" in text
    assert "--tf32 {none,conv,all}" in text
    assert "--stats {csv,json,txt,console}" in text


def test_an_unset_option_says_what_it_means_and_no_default_is_said_twice():
    actions = option_parser("pascal_cdma.py", "pascal", None, 1)._option_string_actions
    # '' (PyTorch's default) is not the choice none: the help must not say "default: none"
    tf32 = actions["--tf32"].help
    assert tf32.endswith("(default: PyTorch's, as above)") and "(default: none)" not in tf32
    assert actions["--attention"].help.endswith("(default: the network definition's)")
    assert [f for f, a in actions.items() if (a.help or "").count("(default:") > 1] == []


def test_every_alias_names_a_preset_and_none_shadows_one():
    assert set(GPU_ALIASES.values()) <= set(GPUS) and not set(GPU_ALIASES) & set(GPUS)
    assert gpu_preset("h100") == "hopper" and gpu_preset("h100_pcie") == "h100_pcie"
    assert "h100" in help_text()


@pytest.mark.parametrize("alias", ["h100", "h100_sxm"])
def test_h100_runs_the_hopper_preset(alias):
    def summary(gpu):
        opts = ["--network", "digits_cnn", "--no-baselines", "--gpu", gpu]
        return sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", opts,
                            console=io.StringIO()).reports["summary"]
    named, hopper = summary(alias), summary("hopper")
    assert named["gpu_preset"] == "hopper" and named["system"] == hopper["system"]
    assert named["iteration_time_s"] == hopper["iteration_time_s"]


def test_an_unknown_gpu_is_still_refused():
    with pytest.raises(sst_cdma.engine.runner.RunError, match="--gpu: invalid choice: 'h1000'"):
        sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", ["--gpu", "h1000"],
                     console=io.StringIO())
