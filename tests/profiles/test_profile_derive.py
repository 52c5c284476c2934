"""Deriving a full-size transformer's profile from a small measured model, role by role."""
from __future__ import annotations

import pytest

from sst_cdma.profiles import (DensityProfile, MeasuredProvenance, ProfileError, ProfilePoint,
                               TensorProfile)
from sst_cdma.profiles.derive import (derive_profile, mapping, source_profile_name,
                                      source_tensor, split_tensor)

GELU_ROLES = ("ln1", "qkv", "scores", "probs", "context", "proj", "res1", "ln2", "fc1", "act",
              "fc2", "res2")
RELU_ROLES = tuple(r for r in GELU_ROLES if r != "act")


def small(network: str, roles, blocks: int = 4) -> DensityProfile:
    """A measured-looking source whose every tensor has its own density (to trace copies)."""
    names = ["embed", *(f"blk{i}/{r}" for i in range(blocks) for r in roles), "ln_f", "lm_head"]
    tensors = {n: TensorProfile((ProfilePoint(0.0, 1.0, {"zstd": 1.0 + k / 100},
                                              {"bfloat16": {"zstd": 2.0 + k / 100}}),
                                 ProfilePoint(1.0, round(0.1 + k / 1000, 6))), (4, 4))
               for k, n in enumerate(names)}
    prov = MeasuredProvenance("small model", "stdlib", 10, "python -m train", "2026-12-01", 0)
    return DensityProfile(network, "float32", prov, tensors)


def gpt2_like(blocks: int, fused: bool = False) -> list[str]:
    attention = ["attn"] if fused else ["scores", "probs", "context"]
    roles = ["ln1", "qkv", *attention, "proj", "res1", "ln2", "fc1", "act", "fc2", "res2"]
    return ["tokens", "embed", *(f"blk{i}/{r}" for i in range(blocks) for r in roles), "ln_f",
            "lm_head", "loss"]


def test_split_tensor():
    assert split_tensor("blk11/fc1") == (11, "fc1")
    assert split_tensor("embed") == (None, "embed")
    assert split_tensor("blkx/fc1") == (None, "blkx/fc1")


@pytest.mark.parametrize("blocks,expected", [
    (12, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]),
    (4, [0, 1, 2, 3]),
    (2, [1, 3]),  # block centres at 1/4 and 3/4 of the depth
    (1, [2]),
    (6, [0, 1, 1, 2, 3, 3]),
])
def test_blocks_map_by_relative_depth(blocks, expected):
    source = small("text_gelu", GELU_ROLES)
    names = [f"blk{j}/fc2" for j in range(blocks)]
    assert [source_tensor(n, blocks, source) for n in names] == [f"blk{i}/fc2" for i in expected]


def test_every_block_of_a_48_block_network_maps_in_order():
    source = small("text_gelu", GELU_ROLES)
    got = [int(source_tensor(f"blk{j}/act", 48, source)[3]) for j in range(48)]
    assert got == sorted(got) and got.count(0) == got.count(3) == 12


def test_roles_and_aliases_map_by_name():
    source = small("text_gelu", GELU_ROLES)
    m = mapping("gpt2_small", gpt2_like(12, fused=True) + ["blk0/rope"], source)
    assert m["blk5/attn"] == "blk1/context"
    assert m["blk0/rope"] == "blk0/qkv"
    assert m["blk11/ln2"] == "blk3/ln2"
    assert m["embed"] == "embed" and m["lm_head"] == "lm_head"
    assert "tokens" not in m and "loss" not in m


def test_derived_profile_copies_the_numbers_and_says_where_they_come_from():
    source = small("text_gelu", GELU_ROLES)
    names = gpt2_like(12)
    derived = derive_profile("gpt2_small", names, source, command="python -m derive gpt2_small",
                             date="2026-12-01")
    assert derived.network == "gpt2_small"
    assert list(derived.tensors) == [n for n in names if n not in ("tokens", "loss")]
    for name, origin in mapping("gpt2_small", names, source).items():
        assert derived.tensors[name].points == source.tensors[origin].points
        assert derived.tensors[name].sample_shape is None
    assert derived.ratio("blk7/probs", "zstd", 0.0, dtype="bfloat16") == \
        source.ratio("blk2/probs", "zstd", 0.0, dtype="bfloat16")
    prov = derived.provenance
    assert prov.kind == "derived"
    assert "'text_gelu'" in prov.source and "small model" in prov.source
    assert "floor((j + 1/2) * 4 / 12)" in prov.method
    assert prov.command == "python -m derive gpt2_small" and prov.date == "2026-12-01"
    assert prov.notes is None


def test_llama_says_swiglu_is_approximated():
    source = small("text_gelu", GELU_ROLES)
    derived = derive_profile("llama_7b", ["blk0/rope", "blk0/fc1", "blk0/act", "blk1/act"],
                             source, command="c")
    assert "SwiGLU is approximated by GELU" in derived.provenance.notes


def test_relu_networks_have_no_act_tensor_to_take():
    source = small("text_relu", RELU_ROLES)
    assert source_tensor("blk3/fc1", 24, source) == "blk0/fc1"
    with pytest.raises(ProfileError, match=r"blk0/act: the measured profile 'text_relu' has no "
                                           r"tensor 'blk0/act'"):
        derive_profile("opt_350m", ["blk0/act", "blk3/act"], source, command="c")


def test_unknown_names_and_families_are_refused():
    source = small("text_gelu", GELU_ROLES)
    with pytest.raises(ProfileError, match="'text_gelu' has no tensor 'pos'"):
        derive_profile("gpt2_small", ["blk0/fc1", "pos"], source, command="c")
    with pytest.raises(ProfileError, match="no tensors to derive"):
        derive_profile("gpt2_small", ["tokens"], source, command="c")
    assert source_profile_name("gpt2_xl") == "text_gelu"
    assert source_profile_name("opt_1_3b") == "text_relu"
    assert source_profile_name("llama_7b") == "text_gelu"
    assert source_profile_name("llama3_70b") == source_profile_name("gpt3_175b") == "text_gelu"
    with pytest.raises(ProfileError, match=r"bert_base: no measured profile .*gpt2_\*"):
        source_profile_name("bert_base")


def test_opt_350m_embedding_projections_take_embed_and_ln_f():
    source = small("text_relu", RELU_ROLES)
    m = mapping("opt_350m", ["embed", "proj_in", "blk0/fc1", "proj_out", "lm_head"], source)
    assert m["proj_in"] == "embed" and m["proj_out"] == "ln_f"


@pytest.mark.parametrize("network", ["gpt2_xl", "opt_1_3b", "llama_7b", "llama3_8b",
                                     "gpt3_175b"])
def test_shipped_derived_profiles_are_what_derive_writes_today(network):
    """The shipped network profiles carry the shipped small models' numbers: regenerated from
    text_relu / text_gelu now, every tensor's points are the same (a retrained small model
    without a rerun of ``derive --write`` fails here)."""
    from sst_cdma.profiles import load_profile
    from sst_cdma.profiles.derive import derive_profile, network_tensors, source_profile_name

    shipped = load_profile(network)
    fresh = derive_profile(network, network_tensors(network),
                           load_profile(source_profile_name(network)), command="x")
    assert list(shipped.tensors) == list(fresh.tensors)
    for name, tensor in fresh.tensors.items():
        assert shipped.tensors[name].points == tensor.points, name
    assert shipped.provenance.kind == "derived"
