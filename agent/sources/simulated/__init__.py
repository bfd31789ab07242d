"""Simulated GPUs and workloads, with exact ground truth."""
