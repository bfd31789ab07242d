"""Live per-GPU state, ordered per node in event time."""
