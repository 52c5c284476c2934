"""Element library ``cdma``: GPU cores, HBM, PCIe bridge and switch, the compressing DMA engine,
host memory and the run reporter. One file per element; ``sst-info cdma.X`` documents each."""
from .summary_schema import SYSTEM_SHAPE

__all__ = ["SUMMARY_SYSTEM_KEYS"]

#: the keys of this library's summary that describe the simulated system rather than what the
#: run measured: a sweep report (``sst-cdma report``) does not plot them as figures
SUMMARY_SYSTEM_KEYS = SYSTEM_SHAPE
