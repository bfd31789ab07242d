"""What ``gpufleet demo`` is made of: a simulated clock and its pacer, the simulated agents,
the collector.

Shared by demo.py, which builds and runs them, and demo_view.py, which prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.source import SimulatedFleet
from agent.stats import AgentStats
from gpufleet.cli.collector import Collector
from gpufleet.cli.demo_pace import Pacer, SimClock

__all__ = ["Demo", "DemoAgent", "SimClock"]


@dataclass
class DemoAgent:
    sampler: Sampler
    shipper: Shipper
    stats: AgentStats
    metrics_url: str
    node: str


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
