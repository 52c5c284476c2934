"""``--stack``: the kernels each training stack launches for a transformer block, their bytes,
their order of cost on a step, the GEMM path's fit to its data, the default left as it was,
and bad input as one line (docs/kernel_model.md, "Stacks")."""
from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sst_in_process import run_sst

from sst_cdma.model.calibration import DATA_DIR, fit_error
from sst_cdma.model.fitted import kernel_model_for, load_tensor_families
from sst_cdma.model.stacks import (DRAM_FRACTION, MASK_BYTES, STACKS, STAT_BYTES, BlockShape,
                                   StackError, block_kernels, check_stack, kernel_seconds)
from sst_cdma.model.tensor_fit import load_tensor_sheet, predict_sheet
from workloads import load_network
from workloads.kernel_pricing import price_network

REPO = Path(__file__).resolve().parents[2]
#: GPT-2 small, micro-batch 4 x 1024 tokens, bf16
T, H, F = 4 * 1024, 768, 3072
GPT2 = BlockShape(tokens=T, hidden=H, fc1=F, act_out=F, qkv=3 * H, itemsize=2, bias=True,
                  dropout=True)


def _names(stack: str, pass_: str) -> list[str]:
    return [f"{k.layer}:{k.name}" for k in block_kernels(stack, GPT2) if k.pass_ == pass_]


def test_kernel_list_of_a_gpt2_block_per_stack() -> None:
    assert block_kernels("fused", GPT2) == []
    assert _names("eager", "fwd") == [
        "ln1:layer_norm", "qkv:bias_add", "res1:bias_add", "res1:dropout", "res1:add",
        "ln2:layer_norm", "act:bias_add", "act:activation", "res2:bias_add", "res2:dropout",
        "res2:add"]
    fused_fwd = ["ln1:layer_norm", "res1:bias_dropout_add", "ln2:layer_norm", "act:bias_gelu",
                 "res2:bias_dropout_add"]
    assert _names("compile", "fwd") == fused_fwd
    assert _names("megatron", "fwd") == fused_fwd
    assert len(block_kernels("eager", GPT2)) == 22
    assert len(block_kernels("compile", GPT2)) == len(block_kernels("megatron", GPT2)) == 16
    assert sorted(_names("megatron", "bwd")) == sorted([
        "ln1:layer_norm_backward", "qkv:bias_grad", "res1:bias_dropout_add_backward",
        "res1:bias_grad", "res1:residual_grad_accumulate", "ln2:layer_norm_backward",
        "act:bias_gelu_backward", "act:bias_grad", "res2:bias_dropout_add_backward",
        "res2:bias_grad", "res2:residual_grad_accumulate"])


def test_llama_block_has_no_bias_or_dropout_kernels() -> None:
    llama = BlockShape(tokens=2048, hidden=4096, fc1=2 * 11008, act_out=11008, qkv=3 * 4096,
                       itemsize=2, bias=False, dropout=False)
    for stack in ("eager", "compile", "megatron"):
        names = {k.name for k in block_kernels(stack, llama)}
        assert not names & {"bias_add", "bias_grad", "dropout", "bias_dropout_add"}, stack
    assert _count(block_kernels("eager", llama), "fwd") == 6  # 2 norms, silu, mul, 2 adds
    assert _count(block_kernels("compile", llama), "fwd") == 5


def _count(kernels: list, pass_: str) -> int:
    return sum(k.pass_ == pass_ for k in kernels)


def test_each_kernel_moves_its_tensors_bytes() -> None:
    act, ffn, s = T * H * 2, T * F * 2, 2
    mask = T * H * MASK_BYTES
    want = {  # (layer, name, pass): (reads, writes) of the tensors the kernel touches
        ("ln1", "layer_norm", "fwd"): (act + 2 * H * s, act + T * STAT_BYTES),
        ("ln1", "layer_norm_backward", "bwd"): (2 * act + T * STAT_BYTES + 2 * H * s,
                                                act + 2 * H * s),
        ("qkv", "bias_add", "fwd"): (3 * act + 3 * H * s, 3 * act),
        ("res1", "dropout", "fwd"): (act, act + mask),
        ("res1", "dropout_backward", "bwd"): (act + mask, act),
        ("res1", "add", "fwd"): (2 * act, act),
        ("act", "activation", "fwd"): (ffn, ffn),
        ("act", "activation_backward", "bwd"): (2 * ffn, ffn),
        ("act", "bias_grad", "bwd"): (ffn, F * s),
    }
    got = {(k.layer, k.name, k.pass_): (k.reads, k.writes) for k in block_kernels("eager", GPT2)}
    for key, rw in want.items():
        assert got[key] == rw, key
    fused = {(k.layer, k.name, k.pass_): k for k in block_kernels("megatron", GPT2)}
    bda = fused[("res1", "bias_dropout_add", "fwd")]
    assert (bda.reads, bda.writes) == (2 * act + H * s, act + mask)
    assert bda.bytes == bda.reads + bda.writes
    gelu = fused[("act", "bias_gelu", "fwd")]
    assert (gelu.reads, gelu.writes) == (ffn + F * s, ffn)


def test_kernel_time_is_bytes_at_the_achievable_bandwidth_or_the_launch() -> None:
    k = block_kernels("eager", GPT2)[0]
    assert kernel_seconds(k, 2e12, 1e-9) == pytest.approx(k.bytes / (2e12 * DRAM_FRACTION))
    assert kernel_seconds(k, 2e12, 1.0) == 1.0


def _step_s(network: str, preset: str, stack: str, batch: int) -> float:
    """The stream's kernel time of one step: every priced kernel, forward and backward."""
    model = replace(kernel_model_for(preset), stack=stack)
    priced = price_network(load_network(network), batch, "bfloat16", model)
    return sum(p.time_ps or 0 for k in priced.values() for p in k.values()) / 1e12


@pytest.mark.parametrize("network,batch", [("gpt2_small", 4), ("llama_7b", 1)])
@pytest.mark.parametrize("preset", ["hopper", "ampere"])
def test_eager_slower_than_compile_no_faster_than_megatron(network: str, batch: int,
                                                           preset: str) -> None:
    eager, compiled, megatron = (_step_s(network, preset, s, batch)
                                 for s in ("eager", "compile", "megatron"))
    assert eager > compiled >= megatron


def test_default_stack_prices_as_before() -> None:
    net = load_network("gpt2_small")
    model = kernel_model_for("hopper")
    assert model.stack == "fused"
    priced = price_network(net, 4, "bfloat16", model)
    assert priced["blk0/ln1"]["fwd"].time_ps is None   # the GPU prices it from its tensors
    assert priced["blk0/act"]["bwd"].time_ps is None
    assert priced["blk0/qkv"]["fwd"].algorithm == "TENSOR_GEMM"
    assert "stack" not in model.describe("bfloat16", "fused")
    eager = replace(model, stack="eager")
    assert "stack eager" in eager.describe("bfloat16", "fused")


def test_gemm_fit_reproduces_its_data_within_the_datas_own_scatter() -> None:
    """The tensor-core GEMM path (tiles and waves; its constants fitted to the T4's 160
    DeepBench GEMMs) against those GEMMs: its geometric-mean error stays within the spread
    the sheet has between rows of the same M, N, K (transposes differ; its median): a curve
    of the shape alone cannot follow that spread."""
    sheet = load_tensor_sheet()
    kp = load_tensor_families()["Turing"].params
    err = fit_error(predict_sheet(sheet, kp)["gemm"] / sheet.seconds["gemm"])
    same: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with open(DATA_DIR / "gemm_train_fp16_tensor_op.csv", newline="") as f:
        for row in csv.DictReader(f):
            same[(row["M"], row["N"], row["K"])].append(float(row["time_ms"]))
    # the median spread (max / min - 1) between the rows of one shape: 6.2% on this sheet
    # (77 shapes measured more than once)
    tolerance = float(np.median([max(v) / min(v) - 1 for v in same.values() if len(v) > 1]))
    assert err.rows == 160
    assert err.geomean_abs_error <= tolerance
    assert abs(err.median_ratio - 1) <= tolerance


def test_bad_stack_is_one_line() -> None:
    # called below the command line: the param's own words (the run below gets the flag's)
    with pytest.raises(StackError, match=r"^stack=fast: unknown stack \(one of "):
        check_stack("fast", "hopper", "Hopper")
    with pytest.raises(StackError) as exc:
        check_stack("megatron", "pascal", "")
    assert "stack=megatron" in str(exc.value) and "'pascal'" in str(exc.value)
    assert "\n" not in str(exc.value)
    assert check_stack("megatron", "volta", "Volta") == "megatron"
    assert set(STACKS) == {"fused", "eager", "compile", "megatron"}


def test_megatron_on_pascal_refused_by_the_run() -> None:
    r = run_sst("topologies/pascal_cdma.py", "--", "--network", "gpt2_small", "--batch", "1",
                "--stack", "megatron", cwd=REPO)
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert "--stack megatron" in lines[0] and "'pascal'" in lines[0]


def test_summary_kernel_times_names_the_stack() -> None:
    import io

    from sst_cdma import run

    def kernel_times(stack: str) -> str:
        r = run(REPO / "topologies/hopper_pcie5_cdma.py",
                ["--network", "gpt2_small", "--batch", "1", "--seq-len", "128", "--dtype",
                 "bfloat16", "--attention", "fused", "--policy", "none", "--no-baselines",
                 "--stack", stack], console=io.StringIO(), record_statistics=False)
        return str(r.reports["summary"]["kernel_times"])

    eager, default = kernel_times("eager"), kernel_times("fused")
    assert "stack eager: its memory-bound kernels at 0.84 of peak DRAM bandwidth" in eager
    assert "T4's 160 DeepBench GEMMs" in eager
    assert "stack" not in default and eager.startswith(default)
