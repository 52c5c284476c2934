"""A short re-run of the digits training reproduces the start of the shipped profile."""
from __future__ import annotations

import itertools

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

from sst_cdma.tools.capture.digits_train import (DEFAULT_CHECKPOINTS, DEFAULT_STEPS,  # noqa: E402
                                           _checkpoint_steps, train_and_profile)
from sst_cdma.profiles import load_profile  # noqa: E402

SHORT_STEPS = 300
SHORT_CHECKPOINTS = (0.0, 0.1, 0.2, 0.5, 1.0)  # steps 0, 30, 60, 150, 300


@pytest.fixture(scope="module")
def short():
    return train_and_profile(SHORT_STEPS, SHORT_CHECKPOINTS, seed=0)


@pytest.fixture(scope="module")
def shipped():
    return load_profile("digits_cnn")


def _shipped_progress(p: float) -> float:
    return p * SHORT_STEPS / DEFAULT_STEPS


def test_shipped_run_covers_the_short_run(shipped):
    assert shipped.provenance.steps == DEFAULT_STEPS
    marks = [p.progress for p in shipped.tensors["conv1"].points]
    for p in SHORT_CHECKPOINTS:
        assert any(abs(_shipped_progress(p) - m) < 1e-9 for m in marks), p


def test_short_run_matches_shipped_densities_and_ratios(short, shipped):
    assert list(short.tensors) == list(shipped.tensors) == ["conv1", "conv2", "pool", "fc1"]
    for name, tensor in short.tensors.items():
        for point in tensor.points:
            at = _shipped_progress(point.progress)
            assert point.density == pytest.approx(shipped.density(name, at), abs=0.02), (name, at)
            for algorithm in ("zvc", "rle", "zlib"):  # the shipped profile predates lz4/zstd
                assert point.ratios[algorithm] == pytest.approx(
                    shipped.ratio(name, algorithm, at), rel=0.05), (name, algorithm, at)


def test_short_run_trend_matches_shipped(short, shipped):
    for name, tensor in short.tensors.items():
        for a, b in itertools.pairwise(tensor.points):
            mine = b.density - a.density
            theirs = (shipped.density(name, _shipped_progress(b.progress))
                      - shipped.density(name, _shipped_progress(a.progress)))
            if abs(theirs) > 0.02:
                assert mine * theirs > 0, (name, a.progress, b.progress, mine, theirs)


def test_short_run_layer_order_matches_shipped(short, shipped):
    for p in SHORT_CHECKPOINTS:
        for x, y in itertools.combinations(short.tensors, 2):
            gap = (shipped.density(x, _shipped_progress(p))
                   - shipped.density(y, _shipped_progress(p)))
            if abs(gap) > 0.02:
                assert (short.density(x, p) - short.density(y, p)) * gap > 0, (p, x, y)


def test_zvc_ratio_follows_density(short):
    for name, tensor in short.tensors.items():
        for point in tensor.points:
            assert point.ratios["zvc"] == pytest.approx(32 / (1 + 32 * point.density), rel=0.01)


def test_density_moves_within_the_short_run(short):
    swings = [max(p.density for p in t.points) - min(p.density for p in t.points)
              for t in short.tensors.values()]
    assert max(swings) > 0.1


def test_provenance_of_a_run(short):
    prov = short.provenance
    assert prov.kind == "measured" and prov.steps == SHORT_STEPS and prov.seed == 0
    assert prov.command == ("python -m sst_cdma.tools.capture.digits_train --steps 300 "
                            "--checkpoints 0,0.1,0.2,0.5,1 --seed 0")
    assert "held-out accuracy" in prov.notes


def test_checkpoint_validation():
    assert _checkpoint_steps(3000, DEFAULT_CHECKPOINTS)[30] == 0.01
    with pytest.raises(ValueError, match="both fall on step 0"):
        _checkpoint_steps(10, (0.0, 0.01))
    with pytest.raises(ValueError, match="not in \\[0, 1\\]"):
        _checkpoint_steps(10, (1.5,))


def test_command_line_writes_a_profile(tmp_path, capsys):
    from sst_cdma.tools.capture.digits_train import main
    from sst_cdma.profiles import DensityProfile

    out = tmp_path / "d.json"
    assert main(["--steps", "20", "--checkpoints", "0,1", "--output", str(out)]) == 0
    assert "fc1" in capsys.readouterr().out
    profile = DensityProfile.load(out)
    assert profile.provenance.command == ("python -m sst_cdma.tools.capture.digits_train --steps 20 "
                                          f"--checkpoints 0,1 --output {out}")
    assert [p.progress for p in profile.tensors["conv2"].points] == [0.0, 1.0]
    assert main(["--steps", "5", "--checkpoints", "0,0.01"]) == 2
    assert "both fall on step 0" in capsys.readouterr().err
