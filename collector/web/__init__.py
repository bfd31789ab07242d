"""The collector's web console: fleet, idle GPUs, recommendations, workloads, energy.

``gpufleet`` wires it: a SeriesBuffer is attached to the collector's ledger observers
(it sees every newly stored batch), and ``console_routes`` go to ``create_app(...,
extra_routes=...)``.
"""

from collector.web.routes import ConsoleSources, console_routes
from collector.web.series import SeriesBuffer, SeriesPoint

__all__ = ["ConsoleSources", "SeriesBuffer", "SeriesPoint", "console_routes"]
