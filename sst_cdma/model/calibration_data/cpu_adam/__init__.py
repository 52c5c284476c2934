"""CPU Adam files this project measured with ``sst-cdma time-cpu-adam`` (DeepSpeed's
DeepSpeedCPUAdam beside PyTorch's AdamW); README.md gives the machine and the command."""
