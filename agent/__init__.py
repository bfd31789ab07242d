"""gpufleet agent: reads the GPUs of one node, exports them to Prometheus and ships them."""

__version__ = "0.1.0"
