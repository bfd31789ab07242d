"""A real collector and real agents on one simulated clock, for the end-to-end tests.

The collector is the one ``gpufleet collector`` builds (ledger in a SQLite file, price
book, collector core, HTTP app under uvicorn on a loopback port); each simulated node gets the
real agent's Sampler and Shipper (with its on-disk spool) speaking HTTP to it. Simulated
time is set by hand, one sampling step at a time, the way ``gpufleet demo`` pre-runs its
history.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from agent.config import ShipperSettings
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.hardware import gpu_model
from agent.sources.simulated.plan import build_gpus, make_workload
from agent.sources.simulated.skew import SkewedClock, SkewedNode
from agent.sources.simulated.source import (
    DEFAULT_START_TIME,
    ActivityKind,
    SimJob,
    SimulatedFleet,
    SimulatedNode,
    build_fleet,
)
from agent.sources.simulated.workloads import make_pattern, stable_key
from agent.stats import AgentStats
from collector.cluster.settings import ClusterSettings
from collector.config import AnalysisSettings, CollectorSettings, LedgerSettings, ServerSettings
from gpufleet.cli.collector import Collector, build_collector, serve
from gpufleet.cli.demo_fleet import Outage, SimClock

TOKEN = "e2e-agent-token-7f3a9c"
#: on the extra node, stuck job A takes a free GPU at +2 h, job B replaces it at +4 h
LATE_A_START_SECONDS, LATE_B_START_SECONDS = 2 * 3600.0, 4 * 3600.0


def build_e2e_fleet(start_time: float = DEFAULT_START_TIME) -> SimulatedFleet:
    """``build_fleet``'s 4 x 8 GPUs plus a 1-GPU node where jobs arrive on an idle GPU.

    In the default fleet every job holds its GPUs from before the epoch; here a stuck job
    starts mid-run on a GPU that has sat idle and unallocated for two hours, and another
    stuck job takes over the still idle GPU when it ends, so the collector must tell the
    holders' idle time apart.
    """
    name, seed = "gpu-node-late", 0
    jobs = [
        SimJob(
            workload=make_workload(ActivityKind.STUCK, False, seed, name, slot),
            pattern=make_pattern(ActivityKind.STUCK, stable_key(seed, name, slot, "pattern")),
            node=name,
            gpu_indexes=(0,),
            start_time=start_time + begin,
            end_time=None if end is None else start_time + end,
        )
        for slot, (begin, end) in enumerate(
            [(LATE_A_START_SECONDS, LATE_B_START_SECONDS), (LATE_B_START_SECONDS, None)]
        )
    ]
    late = SimulatedNode(name, build_gpus(name, [gpu_model("H100")], jobs, seed, start_time))
    return SimulatedFleet([*build_fleet(start_time=start_time).nodes, late])


def free_port() -> int:
    """A loopback port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Agent:
    sampler: Sampler
    shipper: Shipper
    stats: AgentStats
    #: the agent's network to the collector; up until a test sets its outage window
    network: Outage


def build_agent(
    node: SimulatedNode,
    url: str,
    clock: SimClock,
    step_seconds: float,
    spool_dir: Path,
    offset_seconds: float = 0.0,
) -> Agent:
    """The real agent parts for one simulated node, stamping samples with ``clock`` (moved
    by ``offset_seconds``: the node's clock), over a network that can go down."""
    stats = AgentStats()
    settings = ShipperSettings(url=url, token=TOKEN, spool_dir=spool_dir)
    network = Outage(clock, math.inf, math.inf)  # a test sets the window (simulated time)
    node_clock = SkewedClock(clock, offset_seconds) if offset_seconds else clock
    shipper = Shipper(settings, node.name, stats, transport=network, clock=node_clock)
    source = SkewedNode(node, offset_seconds) if offset_seconds else node
    hosts = None if offset_seconds else node  # the workloads' host CPU (issue 24)
    sampler = Sampler(source, stats, step_seconds, sink=shipper, clock=node_clock, hosts=hosts)
    return Agent(sampler, shipper, stats, network)


class FleetRig:
    """``fleet`` sampled every ``step_seconds`` of simulated time from its epoch.

    Agents flush and the collector applies and evaluates every ``ship_every`` ticks. A node
    in ``clock_offsets`` runs its agent on a clock that many seconds off the collector's.
    """

    def __init__(
        self,
        fleet: SimulatedFleet,
        workdir: Path,
        step_seconds: float,
        ship_every: int,
        clock_offsets: Mapping[str, float] | None = None,
        ledger_url: str | None = None,
        replica: bool = False,
    ) -> None:
        """``ledger_url``: a ``postgresql://`` ledger instead of a SQLite file in
        ``workdir``; ``replica``: the collector runs as the one replica on it (cluster
        enabled: it leases every shard and leads), applying through its shards' owners."""
        self.fleet = fleet
        self.step_seconds = step_seconds
        self.ship_every = ship_every
        self.start = fleet.nodes[0].epoch
        self.clock = SimClock(self.start)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.settings = CollectorSettings(
            server=ServerSettings(port=self.port, tokens=[TOKEN]),
            ledger=LedgerSettings(url=ledger_url or str(workdir / "ledger.db")),
            # three missed samples make a gap unknown
            analysis=AnalysisSettings(stale_after_seconds=3 * step_seconds),
            cluster=ClusterSettings(enabled=replica, lease_seconds=3, renew_seconds=1),
        )
        self.collector: Collector = build_collector(
            self.settings, self.clock, tokens=frozenset([TOKEN])
        )
        offsets = clock_offsets or {}
        self.agents = [
            build_agent(
                node,
                self.url,
                self.clock,
                step_seconds,
                workdir / "spool" / node.name,
                offsets.get(node.name, 0.0),
            )
            for node in fleet.nodes
        ]
        self.server: uvicorn.Server | None = None
        self.ticks = 0

    def __enter__(self) -> FleetRig:
        self.server = serve(self.collector)
        return self

    def __exit__(self, *exc: object) -> None:
        for agent in self.agents:
            agent.shipper.close()
        if self.server is not None:
            self.server.should_exit = True
        self.collector.stop()

    @property
    def now(self) -> float:
        return self.clock()

    def agent(self, node: str) -> Agent:
        return next(a for a, n in zip(self.agents, self.fleet.nodes, strict=True) if n.name == node)

    def run_until(self, end: float) -> None:
        """Sample every step up to and including ``end``; ship and apply on the way."""
        t = self.start + self.ticks * self.step_seconds  # the next step not sampled yet
        while t <= end + 1e-9:
            self.clock.set(t)
            for agent in self.agents:
                agent.sampler.tick()
            self.ticks += 1
            if self.ticks % self.ship_every == 0:
                self.ship_and_apply()
            t = self.start + self.ticks * self.step_seconds

    def ship_and_apply(self) -> None:
        for agent in self.agents:
            agent.shipper.flush()
        self.collector.core.applier.tick()
        self.collector.core.recommender.evaluate_if_due()

    def finish(self) -> None:
        """Ship everything, apply past the reorder window, evaluate at the end."""
        for agent in self.agents:
            agent.shipper.flush()
        self.collector.core.applier.tick(flush=True)
        self.collector.core.recommender.evaluate(self.clock())
