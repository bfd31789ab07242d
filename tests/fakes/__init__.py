"""Fakes of the things the agent and collector talk to (here: the NVML C library)."""
