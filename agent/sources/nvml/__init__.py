"""The NVML source: the only code that imports pynvml (nvidia-ml-py)."""
