"""The shipped estimated density profiles of the seven networks and their generator."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from sst_cdma.profiles import EstimatedProvenance, ProfileError, load_profile, shipped_profiles
from sst_cdma.profiles import estimate
from sst_cdma.profiles.estimate import (
    D_INIT,
    DIP,
    NETWORKS,
    PROGRESS,
    estimate_profile,
    final_relu_density,
    main,
    pool_density,
    training_curve,
    zvc_ratio,
)
from workloads import load_network, parse_stream, render_stream

SHIPPED = Path(str(estimate.shipped_dir()))


@functools.lru_cache(maxsize=None)
def stream(network: str, policy: str):
    """The parsed stream of ``network`` at a small batch under ``policy``."""
    return parse_stream(render_stream(network, 2, policy=policy), source=f"{network}/{policy}")


def offloaded(network: str, policy: str) -> list[str]:
    return list(dict.fromkeys(op.name for op in stream(network, policy).ops
                              if op.op == "offload"))


@functools.lru_cache(maxsize=None)
def shipped(network: str):
    return load_profile(network)


# -- the shipped files ---------------------------------------------------------------------------

@pytest.mark.parametrize("network", NETWORKS)
def test_shipped_profile_loads_and_is_estimated(network):
    assert network in shipped_profiles()
    profile = shipped(network)
    assert profile.network == network
    assert profile.dtype == "float32"
    assert isinstance(profile.provenance, EstimatedProvenance)
    assert "HPCA 2018" in profile.provenance.source
    assert "estimate" in profile.provenance.source.lower()
    assert "python -m sst_cdma.profiles.estimate --all" in profile.provenance.notes


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("policy", ["all", "conv"])
def test_profile_covers_every_offloaded_tensor(network, policy):
    names = offloaded(network, policy)
    assert names, f"{network} offloads nothing under {policy}"
    shipped(network).require_tensors(names)  # raises ProfileError naming what is missing


@pytest.mark.parametrize("network", NETWORKS)
def test_profile_holds_exactly_the_policy_all_tensors_in_order(network):
    assert list(shipped(network).tensors) == offloaded(network, "all")


@pytest.mark.parametrize("network", NETWORKS)
def test_points_progress_densities_and_shapes(network):
    profile = shipped(network)
    shapes = load_network(network).tensors(1)
    for name, tensor in profile.tensors.items():
        assert tuple(p.progress for p in tensor.points) == PROGRESS, name
        for point in tensor.points:
            assert 0.0 <= point.density <= 1.0, (name, point)
            assert not point.ratios, f"{name}: an estimate must not carry measured ratios"
        assert tensor.sample_shape == shapes[name].shape[1:], name


@pytest.mark.parametrize("network", NETWORKS)
def test_input_image_is_dense(network):
    profile = shipped(network)
    inputs = [t for t in stream(network, "all").tensors.values()
              if t.kind == "activation" and load_network(network).layer(t.layer).kind == "data"]
    assert [t.name for t in inputs] == ["data"]
    for p in PROGRESS:
        assert profile.density("data", p) == 1.0


@pytest.mark.parametrize("network", NETWORKS)
def test_non_relu_tensors_are_dense(network):
    profile = shipped(network)
    declared = stream(network, "all").tensors
    for name in profile.tensors:
        if not declared[name].sparse:
            assert all(p.density == 1.0 for p in profile.tensors[name].points), name


@pytest.mark.parametrize("network", NETWORKS)
def test_mean_sparse_density_at_end_is_plausible(network):
    profile = shipped(network)
    declared = stream(network, "all").tensors
    sparse = [n for n in profile.tensors if declared[n].sparse]
    assert sparse
    mean = sum(profile.density(n, 1.0) for n in sparse) / len(sparse)
    assert 0.2 <= mean <= 0.5, mean
    # ReLU outputs are sparse: no post-ReLU tensor is denser at the end than a global pool.
    assert max(profile.density(n, 1.0) for n in sparse) < 1.0


def test_average_over_networks_matches_the_paper():
    """Mean over the networks of the mean post-ReLU density at the end: ~0.35 (ZVC ~2.6x)."""
    means = []
    for network in NETWORKS:
        profile = shipped(network)
        declared = stream(network, "all").tensors
        sparse = [n for n in profile.tensors if declared[n].sparse]
        means.append(sum(profile.density(n, 1.0) for n in sparse) / len(sparse))
    overall = sum(means) / len(means)
    assert 0.33 <= overall <= 0.37, means
    assert 2.4 <= zvc_ratio(overall) <= 2.8


def test_vgg16_density_falls_with_depth():
    profile = shipped("vgg16")
    conv_inputs = offloaded("vgg16", "conv")
    sparse = [n for n in conv_inputs if stream("vgg16", "conv").tensors[n].sparse]
    third = len(sparse) // 3
    for p in PROGRESS[1:]:
        first = [profile.density(n, p) for n in sparse[:third]]
        last = [profile.density(n, p) for n in sparse[-third:]]
        assert sum(first) / third > sum(last) / third, p
    # and the ReLU outputs of the convolutions fall monotonically at the end
    convs = [n for n in sparse if n.startswith("conv")]
    finals = [profile.density(n, 1.0) for n in convs]
    assert finals == sorted(finals, reverse=True)
    assert 0.5 <= finals[0] <= 0.6 and 0.1 <= finals[-1] <= 0.3


def test_training_shape_in_shipped_files():
    """Deep ReLU outputs drop within the first 10% of training, then drift back up."""
    profile = shipped("vgg16")
    for name in ("conv3_3", "conv4_3", "conv5_3", "fc6"):
        d = [profile.density(name, p) for p in PROGRESS]
        at = dict(zip(PROGRESS, d))
        assert at[0.1] == min(d), name
        assert at[0.0] > at[0.05] > at[0.1], name
        later = [at[p] for p in PROGRESS if p >= 0.1]
        assert later == sorted(later), name
        assert at[1.0] - at[0.1] < 0.25 * (at[0.0] - at[0.1]), "the drift back is slight"


# -- the rules -----------------------------------------------------------------------------------

def test_rules():
    assert final_relu_density(0.0) == pytest.approx(0.55)
    assert final_relu_density(1.0) == pytest.approx(0.10)
    assert 0.1 <= final_relu_density(0.75) <= 0.3
    with pytest.raises(ValueError):
        final_relu_density(1.5)
    assert training_curve(0.3, 0.0) == D_INIT
    assert training_curve(0.3, 0.1) == pytest.approx(DIP * 0.3)
    assert training_curve(0.3, 1.0) == pytest.approx(0.3)
    assert pool_density(0.3, 1) == pytest.approx(0.3)
    assert pool_density(0.3, 4) > 0.3 and pool_density(0.3, 9) > pool_density(0.3, 4)
    assert pool_density(0.0, 9) == 0.0 and pool_density(1.0, 9) == 1.0
    assert zvc_ratio(0.35) == pytest.approx(2.6, abs=0.03)
    assert zvc_ratio(0.0) == 32.0


def test_derived_tensors_follow_their_rules():
    alexnet = shipped("alexnet")
    resnet = shipped("resnet50")
    googlenet = shipped("googlenet")
    squeezenet = shipped("squeezenet")
    for p in PROGRESS:
        # LRN keeps the density of its ReLU input; max-pooling is denser than its input
        assert alexnet.density("norm1", p) == alexnet.density("conv1", p)
        assert alexnet.density("pool5", p) > alexnet.density("conv5", p)
        # dropout (ratio 0.5) halves the density of the fc ReLU outputs it modifies
        assert alexnet.density("fc7", p) < alexnet.density("conv5", p)
        # ResNet-50: conv outputs dense, post-ReLU ones sparse
        assert resnet.density("res3a/branch2a", p) == 1.0
        assert resnet.density("res3a/add", p) < 1.0
        assert resnet.density("res3a/bn_branch2a", p) < 1.0
    # a pre-add batchnorm output is read by no backward kernel: never offloaded, not profiled
    assert "res3a/bn_branch2c" not in resnet.tensors
    # concat is the element-weighted mean of its inputs (to the files' rounding)
    parts = {"inception_3a/1x1": 64, "inception_3a/3x3": 128, "inception_3a/5x5": 32,
             "inception_3a/pool_proj": 32}
    mean = sum(googlenet.density(n, 1.0) * c for n, c in parts.items()) / sum(parts.values())
    assert googlenet.density("inception_3a/output", 1.0) == pytest.approx(mean, abs=2e-4)
    assert squeezenet.density("fire2/concat", 1.0) == pytest.approx(
        squeezenet.density("fire2/expand1x1", 1.0), abs=2e-4)


# -- the generator -------------------------------------------------------------------------------

def test_regenerating_gives_byte_identical_files(tmp_path, capsys):
    assert main(["--all", "--output-dir", str(tmp_path), "--quiet"]) == 0
    for network in NETWORKS:
        fresh = (tmp_path / f"{network}.json").read_bytes()
        assert fresh == (SHIPPED / f"{network}.json").read_bytes(), (
            f"{network}.json is out of date: run python -m sst_cdma.profiles.estimate --all")
    assert main(["--all", "--check", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "unchanged" in out and "vgg16" in out


def test_check_reports_a_stale_file(tmp_path):
    assert main(["vgg16", "--output-dir", str(tmp_path), "--quiet"]) == 0
    path = tmp_path / "vgg16.json"
    path.write_text(path.read_text().replace('"density": 0.55', '"density": 0.56', 1))
    assert main(["vgg16", "--check", "--output-dir", str(tmp_path), "--quiet"]) == 1
    assert main(["vgg16", "--output-dir", str(tmp_path), "--quiet"]) == 0
    assert main(["vgg16", "--check", "--output-dir", str(tmp_path), "--quiet"]) == 0


def test_estimate_profile_equals_shipped():
    assert estimate_profile("alexnet") == shipped("alexnet")


@pytest.mark.parametrize("argv", [[], ["lenet"]])
def test_cli_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


# -- the comparison with the measured digits_cnn trend stated in the provenance --------------

def test_digits_comparison_in_provenance_still_holds():
    """The provenance says the measured digits_cnn trend has the same shape; check it."""
    try:
        digits = load_profile("digits_cnn")
    except ProfileError:
        pytest.skip("digits_cnn.json is not shipped yet")
    assert "digits_cnn" in shipped("vgg16").provenance.notes
    for name in ("conv2", "fc1"):  # the outputs of DigitsCNN's relu2 and relu3
        points = digits.tensors[name].points
        start, end = points[0].density, points[-1].density
        early_min = min(p.density for p in points if p.progress <= 0.1)
        assert early_min < start and early_min < end, name
        assert end - early_min < start - early_min, name
        assert 0.8 <= early_min / end <= 0.95, name  # the estimate's DIP is 0.88
    conv1 = digits.tensors["conv1"].points
    assert conv1[-1].density > conv1[0].density
