"""A density profile or a samples file naming a tensor the network does not have, or a sample
shape unlike the tensor's, is refused in one line naming the file and the tensor (issue #24);
the shipped profiles, which cover both attention forms of a transformer, all pass."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

import sst_cdma
from sst_cdma.profiles import load_profile, shipped_profiles
from sst_cdma.profiles.network_names import network_tensor_shapes
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
HOPPER = REPO / "topologies" / "hopper_pcie5_cdma.py"


def shipped(network: str) -> dict:
    return json.loads((REPO / "workloads" / "profiles" / f"{network}.json").read_text())


def refused(topology: Path, *options: str) -> str:
    with pytest.raises(RunError) as err:
        sst_cdma.run(topology, list(options), console=io.StringIO())
    text = str(err.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("network", shipped_profiles())
def test_every_shipped_profile_names_only_tensors_of_its_network(network):
    known = network_tensor_shapes(network)
    if known is None:                                  # text_relu/gelu: a captured model only
        assert network.startswith("text_")
        return
    unknown = [name for name in load_profile(network).tensors if name not in known]
    assert unknown == []


def test_a_transformer_profile_covers_both_attention_forms():
    known = network_tensor_shapes("gpt2_small")
    assert known is not None and {"blk0/context", "blk0/attn"} <= set(known)


def test_a_profile_tensor_the_network_lacks_is_refused_with_the_closest_name(tmp_path):
    doc = shipped("digits_cnn")
    doc["tensors"]["conv11"] = doc["tensors"]["conv1"]
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(doc))
    text = refused(PASCAL, "--network", "digits_cnn", "--profile", str(path))
    assert text == (f"{path}: gpu0.dma: tensors.conv11: network 'digits_cnn' has no such "
                    "tensor (did you mean 'conv1'?)")


def test_a_transformer_profile_is_checked_though_the_run_moves_nothing(tmp_path):
    doc = shipped("gpt2_small")
    doc["tensors"]["blk0/attnn"] = doc["tensors"].pop("blk0/attn")
    doc["tensors"]["blk1/attnn"] = doc["tensors"].pop("blk1/attn")
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(doc))
    text = refused(HOPPER, "--network", "gpt2_small", "--batch", "1", "--profile", str(path))
    assert text == (f'{path}: gpu0.dma: tensors["blk0/attnn"]: network \'gpt2_small\' has no '
                    "such tensor (did you mean 'blk0/attn'?); 1 more tensors are not the "
                    "network's either")


def test_a_sample_shape_unlike_the_tensors_is_refused_though_the_tensor_stays(tmp_path):
    doc = shipped("digits_cnn")
    doc["tensors"]["fc1"]["sample_shape"] = [65]        # not moved under the default policy
    path = tmp_path / "other_size.json"
    path.write_text(json.dumps(doc))
    text = refused(PASCAL, "--network", "digits_cnn", "--profile", str(path))
    assert text == (f"{path}: gpu0.dma: tensors.fc1.sample_shape [65] is not the simulated "
                    "tensor's [64] (one sample, batch left out): measured on another input "
                    "size")


def test_an_array_of_a_samples_file_the_network_lacks_is_refused(tmp_path):
    path = tmp_path / "samples.npz"
    np.savez(path, conv1=np.zeros((4, 16, 8, 8), np.float32),
             conv_2=np.zeros((4, 32, 8, 8), np.float32))
    text = refused(PASCAL, "--network", "digits_cnn", "--batch", "4", "--tensors", str(path))
    assert text.endswith(f"{path}: sample 'conv_2': network 'digits_cnn' has no such tensor "
                         "(did you mean 'conv2'?)"), text
