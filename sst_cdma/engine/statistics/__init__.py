"""SST statistics: the Accumulator and Histogram statistic types, the enable rules, and the four
statistic outputs (console, CSV, JSON, TXT) in SST-core 16's formats, and
:func:`read_statistics`, which reads those files back into a typed table."""
from sst_cdma.engine.statistics.types import (FIELD_TYPES, AccumulatorStatistic, HistogramStatistic, NullStatistic,
                    Statistic, StatisticError, make_statistic)
from sst_cdma.engine.statistics.outputs import OUTPUT_TYPES, StatisticOutput, make_output
from sst_cdma.engine.statistics.reader import StatisticsFileError, read_statistics

__all__ = [
    "FIELD_TYPES", "AccumulatorStatistic", "HistogramStatistic", "NullStatistic", "Statistic",
    "StatisticError", "make_statistic", "OUTPUT_TYPES", "StatisticOutput", "make_output",
    "StatisticsFileError", "read_statistics",
]
