"""Element library ``cdma``: GPU cores, HBM, PCIe bridge and switch, the compressing DMA engine,
host memory and the run reporter. One file per element; ``sst-info cdma.X`` documents each."""
from .summary_schema import SYSTEM_SHAPE

__all__ = ["SUMMARY_SYSTEM_KEYS", "OPEN_ELEMENT_MODULES"]

#: the keys of this library's summary that describe the simulated system rather than what the
#: run measured: a sweep report (``sst-cdma report``) does not plot them as figures
SUMMARY_SYSTEM_KEYS = SYSTEM_SHAPE

#: the modules that make elements at import, whose names are not known beforehand: the codec
#: units, one element per codec of the registry (``components.codecs``); every other element
#: is found through the source of the module defining its class, so that a run imports only
#: the modules of the elements its script names (``sst_cdma.engine.library.find_element``)
OPEN_ELEMENT_MODULES = ("codecs",)
