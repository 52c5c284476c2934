"""How well the kernel model's tensor-core path fits and carries (docs/kernel_model.md, "The
tensor-core path").

Usage::

    python benchmarks/bench_tensor_core.py              # plain text
    python benchmarks/bench_tensor_core.py --markdown   # the table of docs/kernel_model.md

Refits the path (:mod:`sst_cdma.model.tensor_fit`, a few seconds) and prints, per kind, the
rows, the median of predicted / measured, the geometric mean of |predicted / measured - 1|
and the share within +-25%:

* in sample: the T4's tensor-core sheet (forward, backward-data, backward-filter, GEMM) with
  the fit on it; FlashAttention-2 fwd+bwd on the A100 and on the H100, each with its family's
  fit;
* carried: the T4 fit predicting the best bf16 GEMM of A100 SXM/PCIe, H100 SXM and GH200
  (measurements not used to fit the T4 constants), before and after the per-family cuBLAS
  factor; Ampere's FlashAttention-2 fit predicting the H100 (why each family has its own);
* the former model (assumed constants: 0.8 of the tensor peak for large GEMMs, attention at
  0.9 / 0.75 of that) on the same FlashAttention-2 rows, for comparison.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sst_cdma.model.calibration import fit_error  # noqa: E402
from sst_cdma.model.kernel_model import AttentionParams, TensorCores  # noqa: E402
from sst_cdma.model.tensor_fit import (attention_rows, fit_attention, fit_blas,  # noqa: E402
                                       fit_sheet, gemm_peak_rows, load_tensor_sheet,
                                       predict_attention, predict_sheet, _gemm_busy_s)

# The former model's assumed constants on these rows: a large GEMM at 0.8 of the tensor peak,
# attention at 0.9 (forward) and 0.75 (backward) of that, with no head-dimension term: as one
# share over the forward's 1 and the backward's 2.5 parts of the FLOPs.
_FORMER_SHARE = 3.5 / (1 / (0.8 * 0.9) + 2.5 / (0.8 * 0.75))


def _rows() -> list[tuple[str, np.ndarray]]:
    """Each line of the table: its label and the predicted / measured ratios."""
    out = []
    sheet = load_tensor_sheet()
    turing = fit_sheet(sheet)
    pred = predict_sheet(sheet, turing)
    for kind, p in pred.items():
        ok = ~np.isnan(sheet.seconds[kind])
        out.append((f"T4 tensor-core sheet, in sample: {kind}", p[ok] / sheet.seconds[kind][ok]))
    peaks = gemm_peak_rows()
    out.append(("best bf16 GEMM A100/H100/GH200, carried from the T4 fit (not fitted)",
                np.array([_gemm_busy_s(r, turing, "") / r["seconds"] for r in peaks])))
    fitted = {f: fit_blas(turing, [r for r in peaks if r["family"] == f])
              for f in ("Ampere", "Hopper")}
    out.append(("best bf16 GEMM, cuBLAS factor per family (in sample)",
                np.array([_gemm_busy_s(r, fitted[r["family"]], r["family"]) / r["seconds"]
                          for r in peaks])))
    rows = attention_rows()
    own = {}
    for family, gpu in (("Ampere", "A100"), ("Hopper", "H100")):
        mine = [r for r in rows if r["family"] == family]
        tc = TensorCores(family, fitted[family], {})
        own[family] = replace(tc, attention={"flash2": fit_attention(tc, mine)})
        out.append((f"FlashAttention-2 {gpu}, in sample",
                    np.array([predict_attention(r, own[family]) / r["seconds"]
                              for r in mine])))
    hopper = [r for r in rows if r["family"] == "Hopper"]
    carried = replace(own["Hopper"], attention=own["Ampere"].attention)
    out.append(("FlashAttention-2 H100, carried from Ampere's fit",
                np.array([predict_attention(r, carried) / r["seconds"] for r in hopper])))
    former = replace(own["Hopper"], attention={"flash2": AttentionParams(_FORMER_SHARE, 0.0)})
    out.append(("FlashAttention-2 H100, the former assumed model",
                np.array([predict_attention(r, former) / r["seconds"] for r in hopper])))
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table (``--markdown``: as the markdown of docs/kernel_model.md); exit 0."""
    markdown = "--markdown" in (sys.argv[1:] if argv is None else argv)
    rows = [(label, fit_error(ratios)) for label, ratios in _rows()]
    width = max(len(label) for label, _ in rows)
    if markdown:
        print("| set | rows | median | geomean | within 25% |")
        print("|---|---:|---:|---:|---:|")
    else:
        print(f"{'':<{width}} {'rows':>4} {'median':>7} {'geomean':>8} {'+-25%':>7}")
    for label, e in rows:
        if markdown:
            print(f"| {label} | {e.rows} | {e.median_ratio:.3f} | {e.geomean_abs_error:.1%} | "
                  f"{e.within_25pct:.0%} |")
        else:
            print(f"{label:<{width}} {e.rows:>4} {e.median_ratio:>7.3f} "
                  f"{e.geomean_abs_error:>8.1%} {e.within_25pct:>7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
