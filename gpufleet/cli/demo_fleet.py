"""What ``gpufleet demo`` is made of: a simulated clock and its pacer, the simulated agents,
the collector.

Shared by demo.py, which builds and runs them, and demo_view.py, which prints them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.source import SimulatedFleet
from agent.stats import AgentStats
from gpufleet.cli.collector import Collector
from gpufleet.cli.demo_pace import Pacer, SimClock

__all__ = ["Demo", "DemoAgent", "Outage", "SimClock"]


class Outage(httpx.BaseTransport):
    """An agent's network to the collector that is down for ``[start, end)`` of simulated
    time (``clock``): connection refused meanwhile, real HTTP otherwise."""

    def __init__(self, clock: Callable[[], float], start: float, end: float) -> None:
        self.clock, self.start, self.end = clock, start, end
        self._real = httpx.HTTPTransport()

    def down(self) -> bool:
        return self.start <= self.clock() < self.end

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down():
            raise httpx.ConnectError("simulated outage: collector unreachable", request=request)
        return self._real.handle_request(request)

    def close(self) -> None:
        self._real.close()


@dataclass
class DemoAgent:
    sampler: Sampler
    shipper: Shipper
    stats: AgentStats
    metrics_url: str
    node: str
    #: the node's network to the collector when it has a simulated outage (``--outage``)
    outage: Outage | None = None

    def offline(self) -> bool:
        return self.outage is not None and self.outage.down()


@dataclass
class Demo:
    clock: SimClock
    fleet: SimulatedFleet
    collector: Collector
    agents: list[DemoAgent]
    token: str
    url: str
    #: steps simulated time live, no faster than the agents deliver
    pacer: Pacer
