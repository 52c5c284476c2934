"""Build every network in PyTorch from the same definition and check every tensor's shape
against a real forward pass (batch 2, CPU, no grad)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from workloads import CNNS, load_network  # noqa: E402
from workloads.torch_builder import build_torch  # noqa: E402


@pytest.mark.parametrize("name", CNNS)  # transformers: tests/workloads/test_transformers_torch.py
@pytest.mark.every_network("name")
def test_shapes_and_params_match_a_real_forward_pass(name):
    torch.manual_seed(0)
    net = load_network(name)
    model = build_torch(net).eval()
    batch = 2
    infos = net.infer(batch)
    x = torch.randn(batch, *net.layer("data").params["shape"])
    with torch.inference_mode():
        tensors, outputs = model.forward_all(x)
    mismatched = [(i.name, i.shape, tuple(outputs[i.name].shape))
                  for i in infos if tuple(outputs[i.name].shape) != i.shape]
    assert not mismatched
    for name_, t in net.tensors(batch).items():
        assert tuple(tensors[name_].shape) == t.shape
    assert sum(p.numel() for p in model.parameters()) == sum(i.params for i in infos)
    probs = outputs[infos[-1].name]
    assert torch.allclose(probs.sum(dim=1), torch.ones(batch), atol=1e-4)


def test_post_relu_tensors_are_really_sparse():
    torch.manual_seed(0)
    net = load_network("alexnet")
    model = build_torch(net).eval()
    with torch.inference_mode():
        tensors, _ = model.forward_all(torch.randn(1, 3, 227, 227))
    for name, info in net.tensors(1).items():
        t = tensors[name]
        zeros = (t == 0).float().mean().item()
        if info.sparse:  # post-ReLU, or derived from it by zero-preserving layers
            assert (t >= 0).all(), name
            if any(net.layer(m).kind == "relu" for m in info.modifiers):
                assert zeros > 0.05, name
        else:
            assert zeros < 0.01, name
