"""Element library ``cdma``: GPU cores, HBM, PCIe bridge and switch, the compressing DMA engine,
host memory and the run reporter. One file per element; ``sst-info cdma.X`` documents each."""
