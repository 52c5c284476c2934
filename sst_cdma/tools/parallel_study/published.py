"""The table "megatron": Narayanan et al.'s published training throughput (SC 2021, Table 1:
GPT models on DGX A100 nodes with tensor, pipeline and data parallelism) beside the same layouts
simulated. A check, never a fit: nothing is set from these figures."""
from __future__ import annotations

from dataclasses import dataclass

from workloads import load_network
from workloads.parallel.tensor import transformer_dims

from .registry import Table, register
from .runs import REPO, gib_cells, pipeline_run, simulate

__all__ = ["SCRIPT", "NETWORKS", "COMMON", "Published", "PUBLISHED", "eq3_flops", "megatron"]

SCRIPT = "topologies/dgx_a100_cluster.py"
NETWORKS = REPO / "sst_cdma" / "tools" / "parallel_study" / "networks"
#: Table 1's runs: mixed precision on A100s (16-bit), sequences of 2048 tokens, every
#: activation recomputed (Eq. 3 "assumes activation recomputation", section 5.1); one sequence a
#: micro-batch (Table 1 does not give it; Table 2's PTD-P rows use 1); 1F1B (the paper's
#: interleaved schedule is not said per row)
COMMON = ("--batch", "1", "--seq-len", "2048", "--dtype", "float16", "--policy", "recompute",
          "--schedule", "1f1b")


@dataclass(frozen=True)
class Published:
    """A row of Narayanan et al., SC 2021 (arXiv:2104.04473), Table 1, as transcribed in
    SotaroKaneda/MLCarbon ``data/megatron_table.csv`` (and in agreeing notes on the paper):
    its parameters in billions, the network file this study defines for it, tensor- and
    pipeline-parallel sizes, GPUs, global batch (sequences) and achieved teraFLOP/s per GPU."""

    billions: str
    network: str
    tp: int
    pp: int
    gpus: int
    batch: int
    tflops: float

    @property
    def dp(self) -> int:
        """The data-parallel size: the GPUs over tp x pp."""
        return self.gpus // (self.tp * self.pp)


PUBLISHED = (
    Published("1.7", "megatron_gpt_1_7b", 1, 1, 32, 512, 137.0),
    Published("3.6", "megatron_gpt_3_6b", 2, 1, 64, 512, 138.0),
    Published("7.5", "megatron_gpt_7_5b", 4, 1, 128, 512, 142.0),
    Published("39.1", "megatron_gpt_39_1b", 8, 2, 512, 1536, 138.0),
)
HEADER = ("GPT (Table 1)", "tp x pp x dp", "global batch", "step s",
          "simulated TFLOP/s per GPU (Eq. 3)", "published", "simulated / published",
          "MFU (6N), simulated", "peak GiB per stage")


def eq3_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """The FLOPs of one training step with full activation recomputation, the paper's Eq. 3:
    96 B s l h^2 (1 + s/(6h) + V/(16 l h))."""
    return 96 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden)
                                                   + vocab / (16 * layers * hidden))


@register("megatron", "published training throughput beside the same layouts simulated "
          "(Narayanan et al., SC 2021, Table 1; DGX A100)")
def megatron() -> Table:
    """One row per published layout: the simulated step, its teraFLOP/s per GPU counted as the
    paper counts them (Eq. 3 over the step and the GPUs), the published figure and the ratio,
    the simulated MFU (6 x parameters per token, no recomputation) and each stage's peak."""
    rows = []
    for row in PUBLISHED:
        path = NETWORKS / f"{row.network}.yaml"
        options = ("--network", str(path), "--tp", str(row.tp), "--pp", str(row.pp),
                   "--dp", str(row.dp), "--global-batch", str(row.batch), *COMMON)
        run = pipeline_run(simulate(SCRIPT, options))
        d = transformer_dims(load_network(path))
        tflops = eq3_flops(row.batch, 2048, d.blocks, d.hidden, d.vocab) / (
            run.step_s * row.gpus) / 1e12
        rows.append((f"{row.billions}B", f"{row.tp} x {row.pp} x {row.dp}", str(row.batch),
                     f"{run.step_s:.3f}", f"{tflops:.1f}", f"{row.tflops:.0f}",
                     f"{tflops / row.tflops:.2f}", f"{run.mfu:.1%}",
                     gib_cells(run.peaks)))
    return Table(HEADER, tuple(rows))
