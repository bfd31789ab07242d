"""The agent's node-local Prometheus exporter, its catalogue and dcgm-exporter names."""
