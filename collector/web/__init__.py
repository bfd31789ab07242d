"""The collector's web console: fleet, idle GPUs, recommendations, workloads, energy.

``gpufleet`` wires it: a SeriesTap around the pipeline feeds a SeriesBuffer, and
``console_routes`` go to ``create_app(..., extra_routes=...)``.
"""

from collector.web.routes import ConsoleSources, console_routes
from collector.web.series import SeriesBuffer, SeriesPoint
from collector.web.tap import SeriesTap

__all__ = ["ConsoleSources", "SeriesBuffer", "SeriesPoint", "SeriesTap", "console_routes"]
