"""The collector's Prometheus metrics: catalogue and collectors."""
