"""The ``coreTestElement`` stand-ins against SST-core 16's reference run and sst-info listing
(tests/data/sst-core-16, copied from shared/reference/sst-core-16)."""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from sst_cdma.engine.library import find_element
from sst_cdma.engine.runner import RunError, run
from sst_cdma.engine.testelements.core.rng import MarsagliaRNG, MersenneRNG

REF = Path(__file__).resolve().parents[1] / "data" / "sst-core-16"


def _reference_run(tmp_path: Path) -> Path:
    script = tmp_path / "statistics_example.py"
    shutil.copy(REF / "statistics_example.py", script)
    run(script, output_directory=tmp_path / "out")
    return tmp_path / "out" / "StatisticOutput.csv"


def test_reference_csv_header_sub_ids_and_float_rows_match_sst(tmp_path):
    ours = _reference_run(tmp_path).read_text().splitlines()
    ref = (REF / "StatisticOutput.csv").read_text().splitlines()
    assert ours[0] == ref[0]  # the union of fields, in SST's order
    # the float component draws from SST's Mersenne generator: its rows are SST's, digit for digit
    assert ours[3:] == ref[3:]
    assert [row.split(", ")[:4] for row in ours[1:]] == [row.split(", ")[:4] for row in ref[1:]]


def test_sub_ids_group_in_pandas(tmp_path):
    import pandas as pd

    frame = pd.read_csv(_reference_run(tmp_path), skipinitialspace=True)
    assert sorted(frame.groupby("StatisticSubId").size().to_dict()) == [1, 2]


def test_one_value_per_statistic_each_tick(tmp_path):
    rows = list(csv.reader(_reference_run(tmp_path).open(), skipinitialspace=True))
    head = rows[0]
    f32, f64 = rows[3], rows[4]
    # the two statistics of one component got different values (SST draws one per statistic)
    assert f32[head.index("Sum.f32")] != "0" and f64[head.index("Sum.f64")] != "0"
    assert f32[head.index("Min.f32")] != f64[head.index("Min.f64")]


def test_statistics_component_int_declares_what_sst_info_lists():
    cls = find_element("coreTestElement.StatisticsComponent.int")
    listing = (REF / "sst_info_example.txt").read_text()
    for p in cls.PARAMS:
        assert f"         {p.name}: {p.doc}  [{p.default}]" in listing
    assert [p.name for p in cls.PARAMS] == ["seed_w", "seed_z", "seed", "rng", "count",
                                            "dynamic_reg"]
    assert [p.name for p in cls.PORTS] == ["left", "right"]
    assert [s.name for s in cls.STATISTICS][-1] == "stat5_dyn"


def test_dynamic_statistic_registers_during_the_run(run_script):
    result, _ = run_script("""
import sst
c = sst.Component("c", "coreTestElement.StatisticsComponent.int")
c.addParams({"count": 10, "dynamic_reg": 4, "rng": "Marsaglia", "seed_w": 3, "seed_z": 9})
sst.setStatisticLoadLevel(1)
c.enableAllStatistics()
""")
    table = result.statistics
    dyn = table[table.StatisticName == "stat5_dyn"]
    assert list(dyn.StatisticSubId) == ["5"]
    assert int(dyn["Count.u64"].iloc[0]) == 7  # ticks 4..10


def test_unknown_generator_is_refused(run_script):
    with pytest.raises(RunError, match="rng"):
        run_script('import sst\nc = sst.Component("c", "coreTestElement.StatisticsComponent.int")\n'
                   'c.addParam("rng", "dice")\n')


def test_generators_follow_sst():
    # MT19937 seeded by init_genrand(5489) gives 3499211612 first (the reference sequence)
    assert MersenneRNG(5489).generateNextUInt32() == 3499211612
    r = MarsagliaRNG()
    z = 36969 * (362436069 & 65535) + (362436069 >> 16)
    w = 18000 * (521288629 & 65535) + (521288629 >> 16)
    assert r.generateNextUInt32() == ((z << 16) + w) & 0xFFFFFFFF


def test_a_dynamic_statistic_the_csv_header_lacks_is_said(run_script, tmp_path, capsys):
    run_script("""
import sst
c = sst.Component("c", "coreTestElement.StatisticsComponent.int")
c.addParams({"count": 5, "dynamic_reg": 2})
sst.setStatisticLoadLevel(1)
sst.setStatisticOutput("sst.statOutputCSV")
c.enableStatistics(["stat5_dyn"])
""", output_directory=tmp_path / "o")
    assert "stat5_dyn.5 was registered during the run" in capsys.readouterr().err
    assert (tmp_path / "o" / "StatisticOutput.csv").read_text().count("stat5_dyn") == 1
