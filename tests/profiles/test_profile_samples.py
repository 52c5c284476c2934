"""Activation samples: saved arrays come back bit-exact; a damaged index is a clear error."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sst_cdma.profiles import ProfileError, load_sample_set, load_samples, save_samples


def test_samples_round_trip_bit_exact(tmp_path):
    a = np.array([[0.0, -0.0, 1.5], [np.nan, 0.0, 2.0]], dtype=np.float32)
    b = np.arange(6, dtype=np.float16).reshape(2, 3)
    index = save_samples(tmp_path, {"layer1.0.relu#1": a, "fc": b})
    doc = json.loads(index.read_text())
    assert doc["tensors"]["layer1.0.relu#1"]["file"] == "layer1.0.relu_1.npz"
    back = load_samples(tmp_path)
    assert list(back) == ["layer1.0.relu#1", "fc"]
    assert back["layer1.0.relu#1"].tobytes() == a.tobytes()
    assert back["fc"].dtype == np.float16 and np.array_equal(back["fc"], b)


def test_name_clashes_get_distinct_files(tmp_path):
    save_samples(tmp_path, {"a/b": np.zeros(2), "a_b": np.ones(2)})
    back = load_samples(tmp_path)
    assert back["a/b"].sum() == 0 and back["a_b"].sum() == 2


def test_index_mismatch_is_reported(tmp_path):
    index = save_samples(tmp_path, {"x": np.zeros((2, 3), np.float32)})
    doc = json.loads(index.read_text())
    doc["tensors"]["x"]["shape"] = [3, 2]
    index.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=r"x\.npz: holds float32\[2, 3\], index says "
                                           r"float32\[3, 2\]"):
        load_samples(tmp_path)


def test_missing_index(tmp_path):
    with pytest.raises(ProfileError, match="index.json: no such file: .* is not a samples "
                                           "folder \\(what 'sst-cdma capture --samples DIR' "
                                           "writes\\)"):
        load_samples(tmp_path)


def test_index_records_network_and_element_types(tmp_path):
    raw_bf16 = np.array([[0, 0x3F80]], dtype=np.uint16)
    index = save_samples(tmp_path, {"conv1": np.zeros((2, 3), np.float32), "fc": raw_bf16},
                         network="digits_cnn", element_types={"fc": "bfloat16"})
    doc = json.loads(index.read_text())
    assert doc["network"] == "digits_cnn"
    assert doc["tensors"]["conv1"]["element_type"] == "float32"
    assert doc["tensors"]["fc"]["element_type"] == "bfloat16"
    assert doc["tensors"]["fc"]["dtype"] == "uint16"
    samples = load_sample_set(tmp_path)
    assert samples.network == "digits_cnn" and samples.index == str(index)
    assert samples.samples["fc"].element_type == "bfloat16"
    samples.check("fc", dtype="bfloat16", shape=(1, 2), nbytes=4)


def test_an_index_without_network_or_element_type_still_loads(tmp_path):
    index = save_samples(tmp_path, {"x": np.zeros((2, 3), np.float32)})
    doc = json.loads(index.read_text())
    del doc["tensors"]["x"]["element_type"]
    assert "network" not in doc
    index.write_text(json.dumps(doc))
    samples = load_sample_set(tmp_path)
    assert samples.network is None and samples.samples["x"].element_type == "float32"
    samples.check_network("alexnet")   # unknown: the shapes and dtypes are what is checked
    samples.check("x", dtype="float32", shape=(2, 3), nbytes=24)


def test_samples_of_another_network_are_refused_naming_the_index(tmp_path):
    index = save_samples(tmp_path, {"conv1": np.zeros((2, 3), np.float32)}, network="digits_cnn")
    with pytest.raises(ProfileError) as err:
        load_sample_set(tmp_path).check_network("alexnet")
    assert str(err.value) == f"{index}: network: samples captured for 'digits_cnn', not 'alexnet'"


@pytest.mark.parametrize("kwargs,message", [
    (dict(dtype="float16", shape=(64, 16, 8, 8), nbytes=64 * 16 * 64 * 2),
     "tensor 'conv1': element type float32, but the run simulates float16"),
    (dict(dtype="float32", shape=(32, 16, 8, 8), nbytes=32 * 16 * 64 * 4),
     "tensor 'conv1': shape [64, 16, 8, 8] does not match the simulated tensor's "
     "[32, 16, 8, 8] (batch 64, not 32)"),
    (dict(dtype="float32", shape=(64, 96, 55, 55), nbytes=64 * 96 * 55 * 55 * 4),
     "tensor 'conv1': shape [64, 16, 8, 8] does not match the simulated tensor's "
     "[64, 96, 55, 55]"),
    (dict(dtype="float32", shape=None, nbytes=32 * 16 * 64 * 4),
     "tensor 'conv1': 262144 bytes ([64, 16, 8, 8]), but the simulated tensor has 131072"),
])
def test_a_sample_that_is_not_the_simulated_tensor_is_refused(tmp_path, kwargs, message):
    save_samples(tmp_path, {"conv1": np.zeros((64, 16, 8, 8), np.float32)})
    samples = load_sample_set(tmp_path)
    with pytest.raises(ProfileError) as err:
        samples.check("conv1", **kwargs)
    assert str(err.value) == f"{tmp_path / 'conv1.npz'}: {message}"


def test_raw_uint16_words_stand_for_bfloat16_only(tmp_path):
    np.savez(tmp_path / "t.npz", x=np.zeros((1, 4), np.uint16))
    samples = load_sample_set(tmp_path / "t.npz")
    samples.check("x", dtype="bfloat16", shape=(1, 4), nbytes=8)
    with pytest.raises(ProfileError, match="element type uint16, but the run simulates float16"):
        samples.check("x", dtype="float16", shape=(1, 4), nbytes=8)


def _truncated_copies(path, tmp_path):
    data = path.read_bytes()
    for cut in (0, 10, len(data) // 3, len(data) // 2, len(data) - 30, len(data) - 1):
        bad = tmp_path / f"cut{cut}.npz"
        bad.write_bytes(data[:cut])
        yield bad


def test_a_truncated_npz_is_one_line_naming_the_file(tmp_path):
    rng = np.random.default_rng(0)
    good = tmp_path / "good.npz"
    np.savez_compressed(good, conv1=rng.standard_normal((4, 16, 8, 8)).astype(np.float32))
    for bad in _truncated_copies(good, tmp_path):
        with pytest.raises(ProfileError) as err:
            load_sample_set(bad)
        text = str(err.value)
        assert text.startswith(f"{bad}: ") and "\n" not in text, text


def test_a_truncated_sample_in_a_folder_names_the_file_and_the_tensor(tmp_path):
    rng = np.random.default_rng(0)
    save_samples(tmp_path, {"conv1": rng.standard_normal((4, 16, 8, 8)).astype(np.float32)})
    file = tmp_path / "conv1.npz"
    data = file.read_bytes()
    file.write_bytes(data[:len(data) // 2])
    for loader in (load_samples, load_sample_set):
        with pytest.raises(ProfileError) as err:
            loader(tmp_path)
        text = str(err.value)
        assert text.startswith(f"{file}: not a readable .npz file") and "\n" not in text, text
        assert text.endswith("(the sample of tensor 'conv1')")


def test_an_npz_without_the_activation_array_is_named(tmp_path):
    save_samples(tmp_path, {"x": np.zeros(3, np.float32)})
    np.savez(tmp_path / "x.npz", other=np.zeros(3, np.float32))
    with pytest.raises(ProfileError, match=r"x\.npz: holds no array 'activation' \(it has: "
                                           r"other\)"):
        load_samples(tmp_path)


def test_a_sample_file_with_an_extra_array_is_refused_naming_it_and_the_tensor(tmp_path):
    save_samples(tmp_path, {"conv1": np.ones((2, 3), np.float32)})
    np.savez(tmp_path / "conv1.npz", activation=np.ones((2, 3), np.float32),
             stray=np.zeros(1, np.float32))
    with pytest.raises(ProfileError) as err:
        load_sample_set(tmp_path)
    assert str(err.value) == (f"{tmp_path / 'conv1.npz'}: holds more arrays than 'activation' "
                              "(stray): a sample file holds one (the sample of tensor 'conv1')")


def test_a_sample_file_missing_from_the_set_names_the_tensor_that_wanted_it(tmp_path):
    save_samples(tmp_path, {"conv1": np.ones(2, np.float32), "conv2": np.ones(2, np.float32)})
    (tmp_path / "conv2.npz").unlink()
    with pytest.raises(ProfileError) as err:
        load_sample_set(tmp_path)
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'index.json'}: tensors['conv2'].file: conv2.npz is "
                           f"not in {tmp_path}") and "\n" not in text
    assert text.endswith("capture the samples again with 'sst-cdma capture ... --samples DIR'")
