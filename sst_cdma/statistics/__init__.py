"""SST statistics: the Accumulator and Histogram statistic types, the enable rules, and the four
statistic outputs (console, CSV, JSON, TXT) in SST-core 16's formats."""
from .types import (FIELD_TYPES, AccumulatorStatistic, HistogramStatistic, NullStatistic,
                    Statistic, StatisticError, make_statistic)
from .outputs import OUTPUT_TYPES, StatisticOutput, make_output

__all__ = [
    "FIELD_TYPES", "AccumulatorStatistic", "HistogramStatistic", "NullStatistic", "Statistic",
    "StatisticError", "make_statistic", "OUTPUT_TYPES", "StatisticOutput", "make_output",
]
