"""``load_profile`` finds shipped profiles by network name and files by path."""
from __future__ import annotations

import pytest

from sst_cdma.profiles import ProfileError, load_profile, shipped_profile_path, shipped_profiles


def test_path_is_loaded(document, write):
    path = write(document, "mine.json")
    assert load_profile(path).network == "tiny"
    assert load_profile(str(path)).network == "tiny"


def test_shipped_digits_profile_found_by_name():
    assert "digits_cnn" in shipped_profiles()
    profile = load_profile("digits_cnn")
    assert profile.network == "digits_cnn"
    assert shipped_profile_path("digits_cnn").name == "digits_cnn.json"


def test_unknown_network_lists_what_is_shipped():
    with pytest.raises(ProfileError, match=r"no shipped density profile for network 'alexnet9' "
                                           r"\(shipped: .*digits_cnn"):
        load_profile("alexnet9")


def test_missing_path_is_a_file_error(tmp_path):
    with pytest.raises(ProfileError, match="nothere.json: cannot read"):
        load_profile(tmp_path / "nothere.json")


@pytest.mark.parametrize("network", shipped_profiles())
def test_every_shipped_profile_is_valid_and_named_for_its_network(network):
    profile = load_profile(network)  # validates every field
    assert profile.network == network
    assert profile.provenance.kind in ("measured", "estimated", "derived")
    assert profile.tensors


def test_require_network_names_file_and_field(document, write):
    profile = load_profile(write(document, "mine.json"))
    profile.require_network("tiny")
    with pytest.raises(ProfileError) as err:
        profile.require_network("alexnet")
    assert str(err.value) == (f"{profile.source}: network: the profile describes 'tiny', "
                              f"not 'alexnet'")


def test_a_profile_whose_sample_shape_is_not_the_simulated_tensors_is_refused(tmp_path):
    import io
    import json
    from pathlib import Path

    import sst_cdma
    from sst_cdma.engine.runner import RunError

    repo = Path(__file__).resolve().parents[2]
    doc = json.loads((repo / "workloads" / "profiles" / "alexnet.json").read_text())
    doc["tensors"]["conv2"]["sample_shape"] = [256, 31, 31]
    path = tmp_path / "alexnet_other_size.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(RunError) as err:
        sst_cdma.run(repo / "topologies" / "pascal_cdma.py",
                     ["--network", "alexnet", "--batch", "8", "--no-baselines", "--policy", "all",
                      "--profile", str(path)], console=io.StringIO())
    text = str(err.value)
    assert "\n" not in text and str(path) in text
    assert "tensors.conv2.sample_shape [256, 31, 31] is not the simulated tensor's " \
           "[256, 27, 27] (one sample, batch left out)" in text
