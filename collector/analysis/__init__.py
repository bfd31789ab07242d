"""Idle, energy, usage, carbon, cost and GPU models: pure functions over plain data."""
