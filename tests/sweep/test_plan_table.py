"""sst-cdma plans: what each point's per-tensor plan chose, one row per tensor (a transformer's
blocks together), one column per point."""
from __future__ import annotations

import io
import json

import pandas as pd
import sst_cdma
from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.tools.sweep.plan_table import plan_rows


def test_rows_gather_a_tensor_over_its_blocks():
    rows = plan_rows({"embed": "keep", "blk0/ln1": "recompute", "blk0/fc1": "keep",
                      "blk1/ln1": "recompute", "blk1/fc1": "compress"})
    assert rows == {"embed": {"keep": 1}, "ln1": {"recompute": 2},
                    "fc1": {"keep": 1, "compress": 1}}


def write_sweep(folder, repo, policies):
    records = []
    for k, policy in enumerate(policies):
        out = folder / "points" / f"k{k}"
        sst_cdma.run(repo / "topologies/hopper_pcie5_cdma.py",
                     ["--network", "gpt2_small", "--batch", "1", "--seq-len", "64",
                      "--attention", "fused", "--dtype", "bfloat16", "--policy", policy, "--no-baselines"],
                     output_directory=out, console=io.StringIO())
        s = json.loads((out / "summary.json").read_text())
        records.append({"point": k, "key": f"k{k}", "status": "ok", "opt.policy": policy,
                        "iteration_time_s": s["iteration_time_s"]})
    pd.DataFrame(records).to_csv(folder / "results.csv", index=False)


def test_plans_prints_one_column_per_point(tmp_path, repo, capsys):
    write_sweep(tmp_path, repo, ["recompute-attn", "recompute-ffn+offload-norm"])
    assert main(["plans", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| tensor | policy=recompute-attn | policy=recompute-ffn+offload-norm |")
    cells = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines[2:]}
    assert cells["`attn`"][0] == "recompute 12" and cells["`ln1`"][1] == "offload 12 |"
    assert cells["`fc1`"][0] == "keep 12" and cells["`fc1`"][1].startswith("recompute 12")
    assert main(["plans", str(tmp_path), "--where", "policy=recompute-attn"]) == 0
    assert "recompute-ffn" not in capsys.readouterr().out


def test_no_plan_is_one_line_naming_the_table(tmp_path, capsys):
    (tmp_path / "points" / "k0").mkdir(parents=True)
    (tmp_path / "points" / "k0" / "summary.json").write_text('{"iteration_time_s": 1.0}')
    pd.DataFrame([{"point": 0, "key": "k0", "status": "ok", "opt.policy": "all",
                   "iteration_time_s": 1.0}]).to_csv(tmp_path / "results.csv", index=False)
    assert main(["plans", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "results.csv: no selected point has a per-tensor plan" in err
