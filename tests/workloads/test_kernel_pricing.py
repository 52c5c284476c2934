"""The fitted kernel model inside a run: every kernel of the stream priced once per layer and
pass, its algorithm and workspace in the stream, the timeline and the trace, the framework's
workspace limit, and measured times of one GPU preset scaled to another."""
from __future__ import annotations

import io
import json
import math
from dataclasses import replace

import pytest

import sst_cdma
from sst_cdma.model.fitted import kernel_model_for
from sst_cdma.model.kernel_model import ALGORITHMS, price_attention, price_gemm
from sst_cdma.engine.runner import RunError
from workloads import load_network, parse_stream
from workloads.kernel_pricing import PricedKernel, price_network
from workloads.render import render_stream

from test_layer_times import made_up_times  # noqa: E402 (same folder, on sys.path)

MiB = 1 << 20


def _simulate(repo, *opts, out=None):
    return sst_cdma.run(repo / "topologies/pascal_cdma.py", list(opts), console=io.StringIO(),
                        output_directory=out)


@pytest.mark.parametrize("network", ["alexnet", "googlenet", "resnet50"])
def test_every_kernel_takes_its_priced_time_and_names_its_algorithm(network):
    model = kernel_model_for("pascal")
    prices = price_network(load_network(network), 16, "float32", model)
    stream = parse_stream(render_stream(network, 16, "float32", "all", kernel_model=model),
                          network)
    kinds = {layer.name: layer.kind for layer in load_network(network).layers}
    first = {i.name for i in load_network(network).infer(16) if not i.grad_inputs}
    computes = [op for op in stream.ops if op.op == "compute"]
    assert len(computes) == 2 * len(prices)
    for op in computes:
        priced = prices[op.name][op.pass_]
        assert op.time_ps == priced.time_ps
        assert op.algorithm == priced.algorithm
        if kinds[op.name] in ("conv", "fc"):
            assert op.time_ps > 0
        else:  # memory-bound: the GPU prices it at its HBM's bandwidth
            assert op.time_ps is None and op.algorithm == ""
        if kinds[op.name] == "conv":
            assert op.algorithm and all(a in ALGORITHMS for a in op.algorithm.split("+"))
            # backward: data gradient + filter gradient, or the filter's alone on the input
            assert op.algorithm.count("+") == (0 if op.pass_ == "fwd" or op.name in first
                                               else 1)


def test_a_convolution_pass_gets_the_workspace_of_its_algorithm_within_the_limit():
    model = kernel_model_for("pascal")
    net = load_network("vgg16")
    for limit in (None, 64 * MiB, 0):
        stream = parse_stream(render_stream(net, 32, "float32", "none", kernel_model=model,
                                            workspace_limit=limit), "vgg16")
        prices = price_network(net, 32, "float32", model, limit)
        spaces = {t.name: t.bytes for t in stream.tensors.values() if t.kind == "workspace"}
        expected = {(f"{layer}:ws" if p == "fwd" else f"{layer}:ws.bwd"): k.workspace
                    for layer, passes in prices.items() for p, k in passes.items() if k.workspace}
        assert spaces == expected
        if limit is not None:
            assert all(size <= limit for size in spaces.values())
        if limit == 0:
            assert spaces == {}
        ops = stream.ops
        for i, op in enumerate(ops):
            if op.op == "compute":
                held = [w for w in op.writes if w in spaces]
                for ws in held:  # allocated right before its kernel, freed after the sync
                    assert (ops[i - 1].op, ops[i - 1].name) == ("alloc", ws)
                    assert (ops[i + 1].op, ops[i + 2].op, ops[i + 2].name) == \
                        ("sync", "free", ws)
    unlimited = price_network(net, 32, "float32", model)
    none = price_network(net, 32, "float32", model, 0)
    assert sum(k.time_ps or 0 for p in unlimited.values() for k in p.values()) < \
        sum(k.time_ps or 0 for p in none.values() for k in p.values())


def test_the_timeline_and_the_trace_name_the_algorithm(repo, tmp_path):
    run = _simulate(repo, "--network", "alexnet", "--batch", "16", "--no-baselines",
                    out=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    convs = [ln for ln in summary["layers"] if ln["layer"].startswith("conv")]
    assert convs and all(ln["kernel_algorithm"].startswith(("fwd ", "bwd ")) for ln in convs)
    trace = json.loads((tmp_path / "trace.json").read_text())
    names = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "compute"]
    assert any(n.startswith("conv2 (fwd, ") for n in names)
    assert summary["kernel_times"] == "model fitted on P100 (DeepBench kernel measurements)"
    assert run.reports["summary"]["kernel_times"] == summary["kernel_times"]


def test_the_workspace_cap_binds_the_oracle_too(repo):
    """--workspace is the framework's cap: the oracle (unlimited memory) keeps the fastest
    algorithms within it, so a zero cap slows the oracle as it slows the run."""
    def oracle_s(*opts):
        run = _simulate(repo, "--network", "alexnet", "--batch", "16", *opts)
        return run.reports["summary"]["baselines"]["oracle"]["iteration_time_s"]

    assert oracle_s("--workspace", "0B") > oracle_s()


def test_an_unmeasured_gpu_says_whose_parameters_it_borrows(repo):
    run = _simulate(repo, "--network", "alexnet", "--batch", "16", "--gpu", "hopper",
                    "--no-baselines")
    text = run.reports["summary"]["kernel_times"]
    assert text.startswith("model fitted on Pooled") and "scaled to hopper" in text
    assert "SM width (128 fp32 lanes)" in text  # the P100's SMs have 64
    assert "tensor cores" not in text  # fp32: no tensor-core kernels


def test_a_bfloat16_run_says_what_its_tensor_core_kernels_were_fitted_on(repo):
    run = _simulate(repo, "--network", "alexnet", "--batch", "16", "--gpu", "hopper",
                    "--dtype", "bfloat16", "--no-baselines")
    text = run.reports["summary"]["kernel_times"]
    assert text == kernel_model_for("hopper").describe("bfloat16")
    assert "bfloat16 convolutions and GEMMs on Hopper tensor cores" in text
    assert "fitted on the T4's DeepBench tensor-core sheet" in text
    stream = run.simulation.components["gpu0"].stream
    fc = [op for op in stream.ops if op.op == "compute" and op.name.startswith("fc")]
    assert fc and all(op.algorithm.split("+") == ["TENSOR_GEMM"] * len(op.algorithm.split("+"))
                      for op in fc)


def test_tf32_is_pytorchs_default_on_ampere_and_an_option(repo):
    conv = _simulate(repo, "--network", "alexnet", "--batch", "16", "--gpu", "ampere",
                     "--no-baselines")
    none = _simulate(repo, "--network", "alexnet", "--batch", "16", "--gpu", "ampere",
                     "--tf32", "none", "--no-baselines")
    assert "--tf32 conv: TF32 convolutions" in conv.reports["summary"]["kernel_times"]
    assert "--tf32 none: no TF32" in none.reports["summary"]["kernel_times"]
    assert conv.results["gpu0"].iteration_time_ps < none.results["gpu0"].iteration_time_ps
    with pytest.raises(RunError, match=r"--tf32 all: GPU preset 'pascal' has no TF32"):
        _simulate(repo, "--network", "alexnet", "--batch", "16", "--tf32", "all",
                  "--no-baselines")


def test_measured_times_of_another_preset_are_scaled_by_the_models_ratio(repo, tmp_path):
    times = replace(made_up_times("alexnet", 16), gpu="pascal")
    times.write(tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["gpu"] == "pascal"
    run = _simulate(repo, "--network", "alexnet", "--batch", "16", "--policy", "none",
                    "--gpu", "volta", "--layer-times", str(tmp_path / "t.json"), "--no-baselines")
    net = load_network("alexnet")
    src = price_network(net, 16, "float32", kernel_model_for("pascal"))
    dst = price_network(net, 16, "float32", kernel_model_for("volta"))
    stream = run.simulation.components["gpu0"].stream
    volta, pascal = (kernel_model_for(g).hardware.dram_bandwidth for g in ("volta", "pascal"))
    for op in stream.ops:
        if op.op == "compute":
            measured = times.times_ps[op.name][op.pass_]
            a, b = src[op.name][op.pass_].time_ps, dst[op.name][op.pass_].time_ps
            ratio = pascal / volta if a is None else b / a  # memory-bound: DRAM bandwidth
            assert op.time_ps == round(measured * ratio)
    assert "predicted for volta from pascal" in run.reports["summary"]["kernel_times"]
    # on the preset it was measured on, the file is used as it is
    same = _simulate(repo, "--network", "alexnet", "--batch", "16", "--policy", "none",
                     "--layer-times", str(tmp_path / "t.json"), "--no-baselines")
    assert same.results["gpu0"].iteration_time_ps == sum(
        t["fwd"] + t["bwd"] for t in times.times_ps.values())
    with pytest.raises(RunError, match="scaling it needs --kernel-model fitted"):
        _simulate(repo, "--network", "alexnet", "--batch", "16", "--gpu", "volta",
                  "--layer-times", str(tmp_path / "t.json"), "--kernel-model", "roofline")


def test_a_layer_times_file_naming_an_unknown_preset_is_refused(tmp_path):
    from workloads import WorkloadError
    from workloads.layer_times import load_layer_times

    doc = made_up_times("alexnet", 16).to_json()
    doc["gpu"] = "gtx480"
    (tmp_path / "t.json").write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match="t.json.*'gpu' must name a GPU preset"):
        load_layer_times(tmp_path / "t.json")


def test_algorithms_are_picked_within_the_memory_free_beside_each_kernel():
    model = kernel_model_for("maxwell")
    net = load_network("vgg16")
    capacity = 12 << 30
    free = render_stream(net, 256, "float32", "conv", kernel_model=model)
    fitted = render_stream(net, 256, "float32", "conv", kernel_model=model,
                           memory_capacity=capacity)
    roomy = render_stream(net, 256, "float32", "conv", kernel_model=model,
                          memory_capacity=1 << 50)
    assert roomy == free  # with memory to spare nothing changes
    assert fitted != free
    stream = parse_stream(fitted, "vgg16")
    sizes = {t.name: t.bytes for t in stream.tensors.values()}
    in_use = peak = 0
    for op in stream.ops:
        if op.op == "alloc":
            in_use += sizes[op.name]
            peak = max(peak, in_use)
        elif op.op == "free":
            in_use -= sizes[op.name]
    assert peak <= capacity < stream_peak(free)
    # the kernels that had to give up workspace got slower, none faster
    before = {(op.name, op.pass_): op.time_ps for op in parse_stream(free, "v").ops
              if op.op == "compute"}
    after = {(op.name, op.pass_): op.time_ps for op in stream.ops if op.op == "compute"}
    changed = [k for k in before if before[k] != after[k]]
    assert changed and all(after[k] > before[k] for k in changed)


def stream_peak(text: str) -> int:
    from workloads import stream_stats

    return stream_stats(parse_stream(text, "s")).peak_bytes


def test_transformer_gemms_and_attention_are_priced_on_tensor_cores():
    model = kernel_model_for("h100_pcie")
    hw, kp = model.hardware, model.params
    b, s, h, d = 2, 256, 12, 64
    naive = price_network(load_network("gpt2_small", 256, "naive"), b, "bfloat16", model)
    fused = price_network(load_network("gpt2_small", 256, "fused"), b, "bfloat16", model)

    def ps(*kernels):
        return max(1, math.ceil(sum(k.seconds for k in kernels) * 1e12))

    def gemm(m, n, k, batch=1):
        return price_gemm(m, n, k, hw, kp, batch=batch, dtype="bfloat16", tc=model.tensor)

    tokens = b * s
    qkv = naive["blk0/qkv"]
    assert qkv["fwd"].time_ps == ps(gemm(tokens, 3 * 768, 768))
    assert qkv["bwd"].time_ps == ps(gemm(tokens, 768, 3 * 768), gemm(3 * 768, 768, tokens))
    assert qkv["fwd"].algorithm == "TENSOR_GEMM"
    assert qkv["bwd"].algorithm == "TENSOR_GEMM+TENSOR_GEMM"
    # naive attention: one batched GEMM per sample and head, both operands' gradients back
    assert naive["blk0/scores"]["fwd"].time_ps == ps(gemm(s, s, d, b * h))
    assert naive["blk0/scores"]["bwd"].time_ps == ps(gemm(s, d, s, b * h), gemm(s, d, s, b * h))
    assert naive["blk0/context"]["fwd"].time_ps == ps(gemm(s, d, s, b * h))
    assert naive["blk0/context"]["bwd"].time_ps == ps(gemm(s, s, d, b * h), gemm(s, d, s, b * h))
    assert naive["blk0/probs"]["fwd"].time_ps is None  # the softmax is memory-bound
    # fused: one causal FlashAttention kernel per pass, its fp32 dQ accumulator a workspace
    for p in ("fwd", "bwd"):
        k = price_attention(b, h, s, s, d, p, hw, kp, causal=True, dtype="bfloat16",
                            tc=model.tensor, kernel="flash3")
        assert fused["blk0/attn"][p] == PricedKernel(ps(k), "FLASH_ATTENTION_3",
                                                     k.workspace_bytes)
    assert fused["blk0/attn"]["bwd"].workspace > 0
    # and cheaper than the naive form's three kernels
    for p in ("fwd", "bwd"):
        assert fused["blk0/attn"][p].time_ps < naive["blk0/scores"][p].time_ps + \
            naive["blk0/context"][p].time_ps
    # the LM head (tied to the embedding) still computes its weight gradient
    assert naive["lm_head"]["bwd"].time_ps == ps(gemm(tokens, 768, 50257),
                                                 gemm(50257, 768, tokens))


def test_a_float32_transformer_prices_its_gemms_at_the_fp32_rate():
    model = kernel_model_for("h100_pcie")
    prices = price_network(load_network("gpt2_small", 128), 2, "float32", model)
    assert prices["blk0/fc1"]["fwd"].algorithm == "GEMM"
    assert prices["blk0/scores"]["fwd"].algorithm == "GEMM"
    bf16 = price_network(load_network("gpt2_small", 128), 2, "bfloat16", model)
    assert bf16["blk0/fc1"]["fwd"].time_ps < prices["blk0/fc1"]["fwd"].time_ps
