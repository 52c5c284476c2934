"""The shipped measured transformer profiles (text_relu, text_gelu): complete provenance, the
convention's tensor names, float32 and bfloat16 ratios everywhere, and what the tensors are."""
from __future__ import annotations

import re

import pytest

from sst_cdma.codecs.registry import algorithm_names
from sst_cdma.profiles import MeasuredProvenance, load_profile, shipped_profile_path

ROLES = ["ln1", "qkv", "scores", "probs", "context", "proj", "res1", "ln2", "fc1", "act", "fc2",
         "res2"]


def names(activation: str) -> list[str]:
    roles = [r for r in ROLES if not (activation == "relu" and r == "act")]
    return ["embed", *(f"blk{i}/{r}" for i in range(4) for r in roles), "ln_f", "lm_head"]


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_profile_loads_with_complete_provenance(activation):
    profile = load_profile(f"text_{activation}")
    assert profile.network == f"text_{activation}" and profile.dtype == "float32"
    prov = profile.provenance
    assert isinstance(prov, MeasuredProvenance)
    assert prov.command.startswith(f"python -m sst_cdma.tools.capture.text_train --activation "
                                   f"{activation}")
    assert prov.steps == 640 and prov.seed == 0 and re.match(r"\d{4}-\d\d-\d\d\Z", prov.date)
    assert f"activation {activation}" in prov.model and "blocks 4" in prov.model
    assert "standard library" in prov.data
    assert {"torch", "numpy", "python", "sst-cdma"} <= set(prov.software)
    losses = [float(x) for x in re.findall(r"\d(?:\.\d+)?: (\d+\.\d+)", prov.notes)]
    assert len(losses) == 5 and losses[-1] < 0.5 * losses[0]  # it learned: bits per byte fell
    assert shipped_profile_path(f"text_{activation}").stat().st_size < 200_000


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_every_tensor_has_every_codec_in_float32_and_bfloat16(activation):
    profile = load_profile(f"text_{activation}")
    assert list(profile.tensors) == names(activation)
    for name, tensor in profile.tensors.items():
        assert [p.progress for p in tensor.points] == [0.0, 0.1, 0.25, 0.5, 1.0]
        for point in tensor.points:
            assert list(point.ratios) == list(algorithm_names()), name
            assert list(point.ratios_by_dtype) == ["bfloat16"], name
            assert list(point.ratios_by_dtype["bfloat16"]) == list(algorithm_names()), name


def test_what_the_tensors_are():
    relu, gelu = load_profile("text_relu"), load_profile("text_gelu")
    for i in range(4):
        # post-ReLU fc1 is sparse; GELU's pre-activation and output are dense
        assert relu.density(f"blk{i}/fc1", 1.0) < 0.6
        assert gelu.density(f"blk{i}/fc1", 1.0) > 0.99 and gelu.density(f"blk{i}/act", 1.0) > 0.99
        for profile in (relu, gelu):
            # causal softmax: the upper triangle is exactly zero, -inf scores are not zeros
            assert 0.3 < profile.density(f"blk{i}/probs", 1.0) <= 257 / 512 + 1e-9
            assert profile.density(f"blk{i}/scores", 1.0) == 1.0
    # ZVC cannot pay on dense bfloat16 (a mask bit per 16-bit element): 16/17
    assert gelu.ratio("blk0/act", "zvc", 1.0, dtype="bfloat16") == pytest.approx(16 / 17, rel=0.01)
    assert relu.ratio("blk0/fc1", "zvc", 1.0) > 1.5


def test_the_docs_tables_are_what_text_report_prints():
    from pathlib import Path

    from sst_cdma.tools.capture.text_report import report

    docs = (Path(__file__).resolve().parents[2] / "docs" / "profiles.md").read_text()
    block = docs.split("<!-- text_report begin -->\n")[1].split("<!-- text_report end -->")[0]
    assert block.strip() == report().strip()
