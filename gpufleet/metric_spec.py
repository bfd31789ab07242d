"""One row of a metric catalogue, the shape the agent's and the collector's catalogues share.

Each side keeps its own catalogue (agent/metrics/catalogue.py, collector/metrics/
catalogue.py) and builds its families from these rows; the row type lives here, in the
base package both may import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter", "info"]


@dataclass(frozen=True)
class MetricSpec:
    """One metric family. ``name`` is the exposed name (counters include ``_total``)."""

    name: str
    type: MetricType
    #: base unit as it appears in the name ("watts", "ratio", ...); "" when dimensionless
    unit: str
    labels: tuple[str, ...]
    help: str
