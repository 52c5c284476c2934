"""The results table: flattening, typing, stable bytes."""
from __future__ import annotations

import pandas as pd

from sst_cdma.tools.sweep.table import build_table, flatten, write_tables


def test_flatten_joins_keys_and_indexes_lists():
    summary = {"iteration_time_s": 1.5, "baselines": {"vdnn": {"iteration_time_s": 2.0},
                                                      "oracle": {"fits_in_memory": True}},
               "gpus": [{"t": 1}, {"t": 2}], "empty": {}, "none": None}
    assert flatten(summary) == {"iteration_time_s": 1.5, "baselines.vdnn.iteration_time_s": 2.0,
                                "baselines.oracle.fits_in_memory": True, "gpus.0.t": 1,
                                "gpus.1.t": 2, "none": None}


def test_columns_are_typed_and_missing_values_stay_empty(tmp_path):
    rows = [{"point": 1, "status": "failed", "events": None, "x": None, "ok": None,
             "opt.gen": "4"},
            {"point": 0, "status": "ok", "events": 12, "x": 0.5, "ok": True, "opt.gen": 3}]
    table = build_table(rows)
    assert list(table["point"]) == [0, 1]                    # sorted by point
    assert str(table["events"].dtype) == "Int64"
    assert str(table["ok"].dtype) == "boolean"
    assert table["x"].dtype == "float64"
    csv, parquet = write_tables(table, tmp_path)
    lines = csv.read_text().splitlines()
    assert lines[0] == "point,status,events,x,ok,opt.gen"
    assert lines[1] == "0,ok,12,0.5,True,3"                   # 12, not 12.0
    assert lines[2] == "1,failed,,,,4"
    back = pd.read_parquet(parquet)
    assert list(back["events"].astype("Int64")) == [12, pd.NA] or back["events"].isna().iloc[1]
    assert back["opt.gen"].tolist() == ["3", "4"]            # mixed types become text


def test_flatten_leaves_out_excluded_keys_and_long_lists():
    from sst_cdma.tools.sweep.spec import DEFAULT_EXCLUDE

    summary = {"t": 1, "layers": [{"end_s": 1}], "gpus": [{"t": 2, "layers": [{"x": 1}]}],
               "samples": list(range(100)), "few": [1, 2],
               "plan": {"tensors": {"blk0/fc1": "keep"}, "counts": {"keep": 1}}}
    assert flatten(summary, exclude=DEFAULT_EXCLUDE) == {"t": 1, "gpus.0.t": 2, "few.0": 1,
                                                         "few.1": 2, "plan.counts.keep": 1}
    assert "layers.0.end_s" in flatten(summary)               # kept when not excluded
