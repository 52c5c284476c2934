"""Build every shipped transformer in PyTorch from the same definition (on the meta device: no
weights) and check every tensor's shape and the parameter count; run a tiny one on the CPU
to check that naive and fused attention compute the same thing."""
from __future__ import annotations

import pytest
import yaml

torch = pytest.importorskip("torch")

from network_tiers import tiered  # noqa: E402
from workloads import TRANSFORMERS, load_network  # noqa: E402
from workloads.torch_builder import build_torch  # noqa: E402


@pytest.mark.parametrize("name", tiered(TRANSFORMERS))
def test_shapes_and_params_match_a_meta_forward_pass(name):
    net = load_network(name)
    model = build_torch(net, device="meta")
    batch = 2
    infos = net.infer(batch)
    ids = torch.zeros(batch, net.sample_shape("tokens")[0], dtype=torch.long, device="meta")
    with torch.inference_mode():
        tensors, outputs = model.forward_all(ids)
    mismatched = [(i.name, i.shape, tuple(outputs[i.name].shape))
                  for i in infos if tuple(outputs[i.name].shape) != i.shape]
    assert not mismatched
    for name_, t in net.tensors(batch).items():
        assert tuple(tensors[name_].shape) == t.shape
    assert sum(p.numel() for p in model.parameters()) == net.param_count()


def tiny(tmp_path, attention: str, style: str) -> str:
    llama = style == "llama"
    doc = {"name": f"tiny_{style}", "transformer": {
        "style": style, "layers": 2, "hidden": 64, "heads": 8, "kv_heads": 2 if llama else 8,
        "ffn": 96, "vocab": 101, "positions": 32, "seq_len": 16,
        "activation": "swiglu" if llama else "gelu", "norm": "rmsnorm" if llama else "layernorm",
        "attention": attention, "tie_embeddings": not llama, "bias": not llama}}
    path = tmp_path / f"tiny_{style}_{attention}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("style", ["gpt2", "llama"])
def test_naive_and_fused_attention_agree_on_a_tiny_model(tmp_path, style):
    ids = torch.randint(0, 101, (2, 16), generator=torch.Generator().manual_seed(1))
    results = []
    for attention in ("naive", "fused"):
        torch.manual_seed(0)
        model = build_torch(tiny(tmp_path, attention, style)).eval()
        with torch.inference_mode():
            results.append(model(ids))
    naive, fused = results
    assert naive.shape == (2, 16, 101)
    assert torch.allclose(naive, fused, atol=1e-5)
    # log-probabilities over the vocabulary
    assert torch.allclose(naive.exp().sum(-1), torch.ones(2, 16), atol=1e-4)


def test_causal_mask_keeps_the_future_out(tmp_path):
    torch.manual_seed(0)
    model = build_torch(tiny(tmp_path, "naive", "llama")).eval()
    ids = torch.randint(0, 101, (1, 16), generator=torch.Generator().manual_seed(2))
    changed = ids.clone()
    changed[0, 10:] = (changed[0, 10:] + 1) % 101
    with torch.inference_mode():
        a, b = model(ids), model(changed)
    assert torch.allclose(a[0, :10], b[0, :10], atol=1e-5)
    assert not torch.allclose(a[0, 10:], b[0, 10:], atol=1e-3)


@pytest.mark.parametrize("style", ["gpt2", "llama"])
def test_a_tied_lm_head_shares_the_token_table_and_nothing_else_shares(tmp_path, style):
    model = build_torch(tiny(tmp_path, "naive", style), device="meta")
    shared = model.shared_weights("lm_head")
    if style == "gpt2":  # tie_embeddings
        assert len(shared) == 1 and shared[0] is model.module_of("embed").tokens.weight
        assert model.parameters_of("lm_head") == []
    else:
        assert shared == [] and model.parameters_of("lm_head")
    assert model.shared_weights("blk0/qkv") == [] and model.shared_weights("tokens") == []
