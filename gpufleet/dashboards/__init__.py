"""The Grafana dashboard generator."""
