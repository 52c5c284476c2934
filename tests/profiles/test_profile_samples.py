"""Activation samples: saved arrays come back bit-exact; a damaged index is a clear error."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sst_cdma.profiles import ProfileError, load_samples, save_samples


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
    with pytest.raises(ProfileError, match="index.json: cannot read"):
        load_samples(tmp_path)
