"""Auto-release: policy, executors and the log of what was done."""
