"""What ``gpufleet demo`` is made of: a simulated clock, the simulated agents, the collector.

Shared by demo.py, which builds and runs them, and demo_view.py, which prints them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.source import SimulatedFleet
from agent.stats import AgentStats
from gpufleet.cli.collector import Collector


class SimClock:
    """Simulated Unix time: set by hand during the pre-run, then running at ``speed``."""

    def __init__(self, start: float) -> None:
        self._lock = threading.Lock()
        self._base = start
        self._wall: float | None = None
        self._speed = 1.0

    def set(self, value: float) -> None:
        with self._lock:
            self._base, self._wall = value, None

    def run(self, speed: float) -> None:
        with self._lock:
            self._wall, self._speed = time.monotonic(), speed

    def __call__(self) -> float:
        with self._lock:
            if self._wall is None:
                return self._base
            return self._base + (time.monotonic() - self._wall) * self._speed


@dataclass
class DemoAgent:
    sampler: Sampler
    shipper: Shipper
    stats: AgentStats
    metrics_url: str


@dataclass
class Demo:
    clock: SimClock
    fleet: SimulatedFleet
    collector: Collector
    agents: list[DemoAgent]
    token: str
    url: str
