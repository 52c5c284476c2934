"""``sst-cdma time-layers``: every layer of a definition timed in PyTorch, a file the simulator
accepts, and one-line errors before any timing starts."""
from __future__ import annotations

import io
import json

import pytest

pytest.importorskip("torch")

import sst_cdma  # noqa: E402
from sst_cdma.tools.capture.layer_timing import time_layers  # noqa: E402
from sst_cdma.tools.capture.errors import CaptureError  # noqa: E402
from sst_cdma.tools.capture.timing_cli import main  # noqa: E402
from workloads import load_network  # noqa: E402
from workloads.layer_times import (implied_compute_efficiency,  # noqa: E402
                                            load_layer_times, tensor_core_check)

BRANCHES = """\
name: tiny_branches
layers:
  - {name: data, kind: data, params: {shape: [3, 8, 8]}}
  - {name: pool0, kind: pool, params: {mode: max, kernel_size: 2, stride: 2}}
  - {name: a, kind: conv, inputs: pool0, params: {num_output: 4, kernel_size: 1}}
  - {name: b, kind: conv, inputs: pool0, params: {num_output: 4, kernel_size: 1}}
  - {name: cat, kind: concat, inputs: [a, b]}
  - {name: relu, kind: relu}
  - {name: drop, kind: dropout, params: {ratio: 0.5}}
  - {name: sum, kind: add, inputs: [drop, cat]}
  - {name: fc, kind: fc, params: {num_output: 3}}
  - {name: loss, kind: loss}
"""


@pytest.fixture
def branches(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(BRANCHES)
    return path


def test_every_kernel_is_timed_and_the_file_fits_the_network(branches, tmp_path):
    seen = []
    times = time_layers(branches, 2, repeat=2, warmup=0, cudnn_benchmark=True,
                        progress=lambda layer, f, b: seen.append(layer))
    net = load_network(branches)
    times.check(net, 2, "float32")  # raises unless every layer has both passes
    assert seen == [layer.name for layer in net.layers if layer.kind != "data"]
    for name, passes in times.times_ps.items():
        assert passes["fwd"] > 0, name
    # The pool reads the network input, which needs no gradient, and has no weights: its
    # backward does nothing. Every other layer's backward computes something.
    assert times.times_ps["pool0"]["bwd"] == 0
    assert all(p["bwd"] > 0 for name, p in times.times_ps.items() if name != "pool0")
    times.write(tmp_path / "t.json")  # and the file reads back: zero is its time there
    assert load_layer_times(tmp_path / "t.json").times_ps == times.times_ps
    assert times.network == "tiny_branches" and times.batch == 2
    assert times.device.startswith("CPU ")
    assert times.measured_by.endswith("median of 2 after 0 warm-up, cudnn.benchmark")


def test_bad_requests_are_refused_before_timing(branches):
    with pytest.raises(CaptureError, match="dtype 'float64'"):
        time_layers(branches, 2, dtype="float64")
    with pytest.raises(CaptureError, match="batch and repeat must be at least 1"):
        time_layers(branches, 2, repeat=0)
    with pytest.raises(CaptureError, match="device 'cuda:7' is not usable here"):
        time_layers(branches, 2, device="cuda:7")


def test_a_layer_pytorch_cannot_run_is_named(branches, monkeypatch):
    import torch

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")

    monkeypatch.setattr(torch.autograd, "grad", out_of_memory)
    with pytest.raises(CaptureError) as err:
        time_layers(branches, 2, repeat=1)
    assert str(err.value) == ("layer 'a' (conv) on cpu in float32: PyTorch: CUDA out of memory. "
                              "Tried to allocate 2.00 GiB")


def test_the_cli_writes_a_file_the_simulator_runs_on(repo, tmp_path, capsys):
    out = tmp_path / "digits_b8.json"
    assert main(["--network", "digits_cnn", "--batch", "8", "--repeat", "1", "--gpu", "pascal",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["layer", "fwd", "ms", "bwd", "ms"]
    assert printed[-3].startswith("total")
    assert printed[-2] == f"measured on {load_layer_times(out).device}; wrote {out}"
    times = load_layer_times(out)
    efficiency = implied_compute_efficiency(times, load_network("digits_cnn"), 10.6e12)
    assert printed[-1] == (f"convolutions run at {efficiency:.3f} of the Tesla P100 SXM2's fp32 "
                           f"peak 10.6 TFLOP/s: --compute-efficiency {efficiency:.3f}")
    assert len(printed) == 4 + len(times.times_ps)
    result = sst_cdma.run(repo / "topologies/pascal_cdma.py",
                          ["--network", "digits_cnn", "--batch", "8", "--policy", "all",
                           "--layer-times", str(out)], output_directory=tmp_path / "run",
                          console=io.StringIO())
    gpu = result.results["gpu0"]
    assert gpu.compute_time_ps == sum(p["fwd"] + p["bwd"] for p in times.times_ps.values())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["kernel_times"].startswith(f"measured on {times.device}")


def test_bfloat16_times_are_checked_against_the_tensor_core_path(tmp_path, capsys):
    out = tmp_path / "digits_bf16.json"
    assert main(["--network", "digits_cnn", "--batch", "8", "--dtype", "bfloat16", "--repeat",
                 "1", "--warmup", "0", "--gpu", "h100_pcie", "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    times = load_layer_times(out)
    assert times.dtype == "bfloat16" and times.gpu == "h100_pcie"
    check = tensor_core_check(times, load_network("digits_cnn"), "h100_pcie")
    assert check.kernels == 4  # fc1 and fc2, forward and backward
    assert printed[-1] == (f"tensor-core kernels (4): measured {check.measured_s * 1e3:.3f} ms, "
                           f"modelled {check.modelled_s * 1e3:.3f} ms by the 756.5 TFLOP/s "
                           "dense peak at the constants of Hopper tensor cores: "
                           f"measured/modelled {check.ratio:.3f}")
    # a GPU without bfloat16 tensor cores has nothing to check
    assert main(["--network", "digits_cnn", "--batch", "8", "--dtype", "bfloat16", "--repeat",
                 "1", "--warmup", "0", "--gpu", "volta", "-q", "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "no kernel of this network runs on tensor cores in the model of volta (bfloat16)")


def _tiny_transformer(tmp_path, style: str) -> str:
    llama = style == "llama"
    doc = {"name": f"tiny_{style}", "transformer": {
        "style": style, "layers": 2, "hidden": 64, "heads": 8, "kv_heads": 2 if llama else 8,
        "ffn": 96, "vocab": 101, "positions": 32, "seq_len": 16,
        "activation": "swiglu" if llama else "gelu", "norm": "rmsnorm" if llama else "layernorm",
        "attention": "naive", "tie_embeddings": not llama, "bias": not llama}}
    path = tmp_path / f"tiny_{style}.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    return str(path)


@pytest.mark.parametrize("style, attention", [("gpt2", "naive"), ("llama", "fused")])
def test_a_transformer_is_timed_in_bfloat16_one_layer_of_weights_at_a_time(
        tmp_path, monkeypatch, style, attention):
    import torch

    from sst_cdma.tools.capture import layer_timing

    built = []
    real_build = layer_timing.build_torch

    def spy(net, device=None):
        built.append(real_build(net, device))
        return built[-1]

    monkeypatch.setattr(layer_timing, "build_torch", spy)
    # after each layer its weights are gone again: no layer's weights outlive its timing
    allocated = []
    path = _tiny_transformer(tmp_path, style)
    times = time_layers(path, 2, "bfloat16", repeat=1, warmup=0, seq_len=8, attention=attention,
                        progress=lambda *_: allocated.append(
                            [p for p in built[0].parameters() if p.device.type != "meta"]))
    assert all(not a for a in allocated) and len(allocated) == len(times.times_ps)
    net = load_network(path, 8, attention)
    times.check(net, 2, "bfloat16")
    assert times.seq_len == 8 and times.dtype == "bfloat16"
    assert ("blk0/attn" in times.times_ps) == (attention == "fused")
    assert all(p["fwd"] > 0 and p["bwd"] > 0 for p in times.times_ps.values())
    with pytest.raises(Exception, match="sequence length 8, not 16"):
        times.check(load_network(path, 16, attention), 2, "bfloat16")
    assert torch.get_default_dtype() == torch.float32


def test_the_cli_times_a_transformer_at_its_options(tmp_path, capsys):
    path, out = _tiny_transformer(tmp_path, "gpt2"), tmp_path / "t.json"
    assert main(["--network", path, "--batch", "1", "--seq-len", "8", "--attention", "fused",
                 "--dtype", "bfloat16", "--repeat", "1", "--warmup", "0", "--gpu", "h100_pcie",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    times = load_layer_times(out)
    assert times.seq_len == 8 and "blk1/attn" in times.times_ps
    assert json.loads(out.read_text())["seq_len"] == 8
    # qkv, attn, proj, fc1, fc2 of two blocks and the head, forward and backward
    assert printed[-1].startswith("tensor-core kernels (22): measured ")
    assert main(["--network", "alexnet", "--batch", "1", "--seq-len", "8", "-o", str(out)]) == 2
    assert "option seq_len applies to transformer networks only" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--network", "lenet", "--batch", "2", "-o", "{tmp}/t.json"], "no network 'lenet'"),
    (["--network", "alexnet", "--batch", "2", "-o", "{tmp}/nowhere/t.json"],
     "--output: folder"),
    (["--network", "alexnet", "--batch", "2", "--device", "tpu", "-o", "{tmp}/t.json"],
     "device 'tpu' is not usable here"),
    (["--network", "alexnet", "--batch", "two", "-o", "{tmp}/t.json"],
     "argument --batch: invalid int value: 'two'"),
    (["--network", "alexnet", "--batch", "2"], "the following arguments are required: --output"),
])
def test_cli_errors_are_one_line_and_write_nothing(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("sst-cdma time-layers: error: ")
    assert message in captured.err
    assert not list(tmp_path.iterdir())
