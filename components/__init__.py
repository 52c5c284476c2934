"""Element library ``cdma``: GPU cores, HBM, PCIe bridge and switch, the compressing DMA engine,
host memory and the run reporter. One file per element; ``sst-info cdma.X`` documents each."""
from .summary_schema import SYSTEM_SHAPE

__all__ = ["SUMMARY_SYSTEM_KEYS", "ELEMENT_MODULES", "OPEN_ELEMENT_MODULES"]

#: the keys of this library's summary that describe the simulated system rather than what the
#: run measured: a sweep report (``sst-cdma report``) does not plot them as figures
SUMMARY_SYSTEM_KEYS = SYSTEM_SHAPE

#: element name -> the module of this package that defines it, so that a run imports only the
#: modules of the elements its script names (``sst_cdma.engine.library.find_element``); the
#: codec units are not listed: their elements are made at import, one per registered codec
#: (:data:`OPEN_ELEMENT_MODULES`). ``tests/core/test_library_index.py`` checks this against
#: what importing every module finds.
ELEMENT_MODULES = {
    "CDMAEngine": "cdma_engine",
    "ClusterFabric": "cluster_fabric",
    "ClusterHierarchical": "cluster_algorithms",
    "ClusterRing": "cluster_algorithms",
    "ClusterTree": "cluster_algorithms",
    "CollectivePort": "collective_ops",
    "FittedKernels": "kernel_times",
    "GPU": "gpu",
    "HBM": "hbm",
    "HostCPU": "host_cpu",
    "HostMemory": "host_memory",
    "MeasuredKernels": "kernel_times",
    "ModelStateDriver": "model_state_driver",
    "NVMe": "nvme",
    "NVSwitch": "nvswitch",
    "NetworkWorkload": "network_workload",
    "PCIeBridge": "pcie_bridge",
    "PCIeSwitch": "pcie_switch",
    "PipelinePorts": "pipeline_p2p",
    "PipelineStageWorkload": "pipeline_stage_workload",
    "Reporter": "reporter",
    "RingAllReduce": "ring_allreduce",
    "RooflineKernels": "kernel_times",
    "RootComplex": "root_complex",
    "StreamWorkload": "stream_workload",
    "SyntheticWorkload": "synthetic_workload",
}
#: the modules that make elements at import, whose names are not known beforehand: the codec
#: units, one element per codec of the registry (``components.codecs``)
OPEN_ELEMENT_MODULES = ("codecs",)
