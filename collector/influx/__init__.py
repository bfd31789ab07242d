"""The optional InfluxDB sink."""
