"""StatisticsCollector.copy_statistics: an element's statistics written under the names of the
elements it stands for, in the order the plan gives, each copy with the original's values."""
from __future__ import annotations

from pathlib import Path

from sst_cdma.engine.kernel import Simulator
from sst_cdma.engine.statistics import AccumulatorStatistic
from sst_cdma.engine.statistics.collector import StatisticsCollector


def test_copies_follow_the_plan_and_elements_outside_it_keep_theirs(tmp_path: Path):
    collector = StatisticsCollector(Simulator(), 1, "", {}, tmp_path, record_all=True)
    for component, value in (("gpu0", 3), ("gpu0.dma", 5), ("report", 7)):
        stat = AccumulatorStatistic(component, "bytes")
        stat.add_data(value)
        collector.stats.append(stat)
    collector.copy_statistics([("gpu0", "gpu0"), ("gpu0.dma", "gpu0.dma"), ("gpu0", "gpu1"),
                               ("gpu0.dma", "gpu1.dma")])
    collector.finish(10)
    got = [(row["ComponentName"], row["Sum.u64"]) for row in collector.rows]
    assert got == [("gpu0", 3), ("gpu0.dma", 5), ("gpu1", 3), ("gpu1.dma", 5), ("report", 7)]
    assert [s.component for s in collector.stats][:2] == ["gpu0", "gpu0.dma"]  # originals kept
