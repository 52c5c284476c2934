"""A transformer's layers on the tensor-core path: GPT-2 small's per-kernel times on the H100
PCIe, and simulated training throughput beside published figures (docs/kernel_model.md,
"Transformer layers").

    python benchmarks/bench_transformer_layers.py [--markdown] [--tables layers throughput]

``layers``: ``sst topologies/hopper_pcie5_cdma.py -- --network gpt2_small --batch 4 --dtype
bfloat16 --policy all`` (naive attention) and the same with ``--attention fused``, in process;
each kernel's forward and backward microseconds of block 0 (every block is the same), the LM
head and the loss, from the summary's ``layers`` (their ``kernel_ps``), with the kernel the
summary names (``kernel_algorithm``; none: memory-bound).

``throughput``: ``--policy none --attention fused --optimizer adam --dtype bfloat16 --seq-len
1024`` for each row's network, micro-batch and GPU preset; tokens per second per GPU are the
micro-batch's tokens over the simulated iteration, the model FLOPs per token 6N + 12 L H S (N
parameters, L layers, H hidden, S sequence), the share is of the preset's dense 16-bit
tensor-core peak. The published column is a citation (fixed text: its sources are in the
page's prose), not a computed figure.
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sst_cdma import run  # noqa: E402
from sst_cdma.engine.file_reads import load_yaml  # noqa: E402
from sst_cdma.model.gpus import GPUS  # noqa: E402
from workloads.loader import NETWORK_FILE, load_network, network_path  # noqa: E402
from workloads.transformer import TransformerConfig  # noqa: E402
from text_tables import print_table  # noqa: E402

TOPOLOGY = REPO / "topologies/hopper_pcie5_cdma.py"
SEQ = 1024
#: the per-kernel run: GPT-2 small, micro-batch 4, bf16, H100 PCIe, everything offloaded
LAYERS_RUN = ("--network", "gpt2_small", "--batch", "4", "--dtype", "bfloat16",
              "--gpu", "h100_pcie", "--policy", "all")
#: the layers shown after block 0's (the tied LM head and the loss)
TAIL = ("lm_head", "loss")
#: the throughput rows: network, micro-batch, GPU preset (and its name), published figure and
#: the comparison (a citation: the page's prose gives the sources and what was not found)
THROUGHPUT_ROWS = (
    ("gpt2_small", 16, "ampere", "A100",
     "GPT-2 124M on 8x A100: about 107k tokens/s per GPU (nanoGPT: about 4 days for 600k "
     "iterations of 491,520 tokens, 8x A100 40GB, micro-batch 12) to about 230k (llm.c: 10B "
     "tokens in about 90 minutes, 8x A100 80GB)", "{tokens_vs}"),
    ("gpt2_xl", 8, "ampere", "A100",
     "FlashAttention 2: GPT-style 1.3B-2.7B models at 2k-8k context train at up to 225 "
     "TFLOP/s per A100 (72%)", "{flops_vs}"),
    ("gpt2_xl", 16, "hopper", "H100 SXM",
     "GPT-2 1.6B on 8x H100 SXM (llm.c): about 32B tokens in 24 hours, about 46k tokens/s "
     "per GPU", "{tokens_vs}"),
    ("gpt2_small", 4, "h100_pcie", "",
     "none at this size; small micro-batches are launch-bound", ""),
)
#: the published figures the comparison column is worked out against, per row (tokens/s per
#: GPU: low and high; or model FLOP/s per GPU: the "up to" figure); the same citations
PUBLISHED_TOKENS = {0: (107e3, 230e3), 2: (46e3, 46e3)}
PUBLISHED_FLOPS = {1: 225e12}


def _summary(args: Sequence[str]) -> dict:
    """The summary of one in-process run of the H100 PCIe topology."""
    r = run(TOPOLOGY, list(args), console=io.StringIO(), record_statistics=False)
    return r.reports["summary"]


def _kernels(summary: dict) -> dict[tuple[str, str], tuple[float, str]]:
    """(layer, phase) -> (its kernels' summed microseconds, the kernel the summary names)."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for entry in summary["layers"]:
        key = (entry["layer"], entry["phase"])
        us, _ = out.get(key, (0.0, ""))
        algorithm = entry.get("kernel_algorithm", "").split(" ", 1)[-1]
        out[key] = (us + entry.get("kernel_ps", 0) / 1e6, algorithm)
    return out


def _kernel_text(forward: str, backward: str) -> str:
    """The kernel column: the forward kernel, how many the backward runs; memory-bound
    where the summary names none."""
    if not forward:
        return "memory-bound"
    count = len(backward.split("+"))
    return forward + (f" (backward: {count} kernels)" if count > 1 else "")


def _layer_row(kernels: dict[tuple[str, str], tuple[float, str]], layer: str,
               label: str) -> list[str]:
    """One row of the layers table: ``layer`` of ``kernels`` shown as ``label``."""
    fwd, fwd_kernel = kernels[(layer, "forward")]
    bwd, bwd_kernel = kernels[(layer, "backward")]
    return [label, f"{fwd:.1f}", f"{bwd:.1f}", _kernel_text(fwd_kernel, bwd_kernel)]


def _block0(kernels: dict[tuple[str, str], tuple[float, str]]) -> list[str]:
    """Block 0's layers, in the order of the forward pass."""
    return [layer for layer, phase in kernels if layer.startswith("blk0/") and
            phase == "forward"]


def layers_table() -> list[list[str]]:
    """Block 0's layers of the naive run (the fused run's ``attn`` after naive attention's),
    then the LM head and the loss."""
    naive = _kernels(_summary(LAYERS_RUN))
    fused = _kernels(_summary([*LAYERS_RUN, "--attention", "fused"]))
    block = _block0(naive)
    fused_block = _block0(fused)
    fused_attn = [layer for layer in fused_block if layer not in block]
    naive_attn = [layer for layer in block if layer not in fused_block]
    rows = []
    for layer in block:
        rows.append(_layer_row(naive, layer, f"{layer} (naive)" if layer in naive_attn
                               else layer))
        if naive_attn and layer == naive_attn[-1]:
            rows += [_layer_row(fused, f, f"{f} (`--attention fused`)") for f in fused_attn]
    return rows + [_layer_row(naive, layer, layer) for layer in TAIL]


def _model_flops_per_token(network: str) -> float:
    """6N + 12 L H S: N parameters, L layers, H hidden, S the sequence."""
    config = TransformerConfig(load_yaml(network_path(network), NETWORK_FILE)["transformer"],
                               network, SEQ)
    n = load_network(network, seq_len=SEQ).param_count()
    return 6 * n + 12 * config.layers * config.hidden * SEQ


def _compare(number: int, tokens: float, flops: float, template: str) -> str:
    """The comparison with the published figure of row ``number``."""
    if number in PUBLISHED_FLOPS:
        side = "below" if flops < PUBLISHED_FLOPS[number] else "above"
        return (f"{side} the \"up to\" figure, longer contexts and larger models in the "
                "paper")
    if number in PUBLISHED_TOKENS:
        low, high = PUBLISHED_TOKENS[number]
        if low <= tokens <= high and low != high:
            return "within the range"
        off = tokens / (high if tokens > high else low) - 1
        return f"{abs(off):.0%} {'above' if off > 0 else 'below'}"
    return template


def throughput_table() -> list[list[str]]:
    """The four throughput rows."""
    rows = []
    for number, (network, batch, gpu, name, published, template) in enumerate(THROUGHPUT_ROWS):
        summary = _summary(["--network", network, "--batch", str(batch), "--gpu", gpu,
                            "--seq-len", str(SEQ), "--dtype", "bfloat16", "--attention",
                            "fused", "--policy", "none", "--optimizer", "adam",
                            "--no-baselines"])
        tokens = batch * SEQ / summary["iteration_time_s"]
        flops = tokens * _model_flops_per_token(network)
        preset = f"{gpu} ({name})" if name else gpu
        rows.append([f"{network}, {batch}, {preset}", f"{tokens / 1e3:.3g}k",
                     f"{flops / 1e12:.0f} T ({flops / GPUS[gpu].tensor_flops:.2f})",
                     published, _compare(number, tokens, flops, template)])
    return rows


TABLES = {
    "layers": (["layer", "forward", "backward", "kernel"], ["---", "---:", "---:", "---"],
               layers_table),
    "throughput": (["network, micro-batch, preset", "simulated tokens/s per GPU",
                    "model FLOP/s (share of dense peak)", "published", ""],
                   ["---", "---:", "---:", "---", "---"], throughput_table),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Print the tables (``--markdown``: as docs/kernel_model.md shows them)."""
    p = argparse.ArgumentParser(prog="python benchmarks/bench_transformer_layers.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--markdown", action="store_true", help="markdown tables")
    p.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES),
                   help="which tables (default: both)")
    args = p.parse_args(argv)
    for number, name in enumerate(args.tables):
        head, align, rows_of = TABLES[name]
        if number:
            print()
        print_table(head, align, rows_of(), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
