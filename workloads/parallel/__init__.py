"""Many GPUs, one model: the parallel layouts of a network on the workload floor."""
