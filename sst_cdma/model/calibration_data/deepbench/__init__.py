"""Baidu DeepBench training-kernel measurements (cuDNN/cuBLAS fp32, four NVIDIA GPUs) as CSV;
README.md gives the source and license (Apache-2.0)."""
