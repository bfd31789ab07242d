"""The collector's web console: fleet, idle GPUs, recommendations, workloads, energy.

``gpufleet`` wires it: the pipeline hands every accepted batch to a SeriesBuffer
(``Pipeline.on_accepted``), and ``console_routes`` go to ``create_app(...,
extra_routes=...)``.
"""

from collector.web.routes import ConsoleSources, console_routes
from collector.web.series import SeriesBuffer, SeriesPoint

__all__ = ["ConsoleSources", "SeriesBuffer", "SeriesPoint", "console_routes"]
