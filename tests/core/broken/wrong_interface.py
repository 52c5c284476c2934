# expect: :4: gpu \(cdma.GPU\): port 'hbm' is connected to host \(cdma.HostMemory\) port 'pcie0', which does not provide MemoryPool \(it provides HostStore, HostPath\)$
import sst
host = sst.Component("host", "cdma.HostMemory")
gpu = sst.Component("gpu", "cdma.GPU")
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {"network": "alexnet", "batch": 1, "policy": "none", "write_stream": "false"})
sst.Link("l", "0ps").connect((gpu, "hbm"), (host, "pcie0"))
