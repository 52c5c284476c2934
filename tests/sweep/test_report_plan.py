"""sst-cdma report draws the per-tensor plan of the timeline point."""
from __future__ import annotations

import io
import json

import pandas as pd

import sst_cdma
from sst_cdma.tools.sweep.plan_plot import MAX_BARS, plan_bars
from sst_cdma.tools.sweep.report import write_report


def test_report_draws_the_plan_of_the_timeline_point(tmp_path, repo):
    out = tmp_path / "points" / "k0"
    sst_cdma.run(repo / "topologies/pascal_cdma.py",
                 ["--network", "alexnet", "--batch", "4", "--policy",
                  "compress-conv+recompute-cheap", "--no-baselines"],
                 output_directory=out, console=io.StringIO())
    s = json.loads((out / "summary.json").read_text())
    pd.DataFrame([{"point": 0, "key": "k0", "status": "ok", "opt.network": "alexnet",
                   **{k: s[k] for k in ("iteration_time_s", "compute_time_s",
                                        "stall_time_s")}}]).to_csv(tmp_path / "results.csv",
                                                                   index=False)
    report = write_report(tmp_path)
    text = report.markdown.read_text()
    assert "## Per-tensor plan" in text and "![per-tensor plan](plan.png)" in text
    assert (tmp_path / "report" / "plan.png").stat().st_size > 1000


def test_plan_bars_are_per_tensor_or_per_block():
    small = {"data": "keep", "conv1": "compress", "pool1": "recompute"}
    labels, heights = plan_bars(small, {"data": 10, "conv1": 20, "pool1": 5})
    assert labels == ["data", "conv1", "pool1"]
    assert heights["compress"] == [0, 20, 0] and heights["recompute"] == [0, 0, 5]
    big = {"embed": "keep"}
    for i in range(MAX_BARS // 10 + 2):
        for role in ("ln1", "qkv", "attn", "proj", "res1", "ln2", "fc1", "act", "fc2", "res2"):
            big[f"blk{i}/{role}"] = "recompute" if role in ("attn",) else "keep"
    labels, heights = plan_bars(big, {name: 2 for name in big})
    assert labels[:3] == ["embed", "blk0", "blk1"]
    assert heights["recompute"][1] == 2 and heights["keep"][1] == 18


def test_plan_bars_follow_the_stream_or_natural_order_not_the_summarys_sorted_names():
    """summary.json lists tensors sorted by name (blk0, blk1, blk10, blk11, ..., blk2): the bars
    follow the stream's forward order when the sizes come from it, else natural order."""
    names = sorted(f"blk{i}/{role}" for i in range(MAX_BARS // 2) for role in ("qkv", "fc1"))
    tensors = {"embed": "keep", **{n: "keep" for n in names}, "lm_head": "keep"}
    labels, _ = plan_bars(dict(sorted(tensors.items())), {})
    assert labels[:4] == ["blk0", "blk1", "blk2", "blk3"] and labels[-2:] == ["embed", "lm_head"]
    forward = ["embed", *(f"blk{i}/{role}" for i in range(MAX_BARS // 2)
                          for role in ("qkv", "fc1")), "lm_head"]
    labels, heights = plan_bars(dict(sorted(tensors.items())), {n: 2 for n in forward})
    assert labels[:3] == ["embed", "blk0", "blk1"] and labels[10] == "blk9"
    assert labels[11] == "blk10" and labels[-1] == "lm_head"
    assert heights["keep"][1] == 4
