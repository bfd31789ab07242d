"""gpufleet collector: turns agent samples into idle waste, energy, carbon and recommendations."""
