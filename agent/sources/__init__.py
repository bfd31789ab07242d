"""GPU sources: NVML, the simulator and recorded traces, behind one interface."""
