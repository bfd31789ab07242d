"""Real agents on simulated clocks against a real collector, for the fault scenarios.

Each ``SimAgent`` is the real agent's Sampler and Shipper (with its on-disk spool) over one
simulated node, stamping samples with its own ``SimClock`` (moved by ``skew_seconds``: the
node's clock) and sending through a ``Wire`` (wire.py) that keeps every exchange. The
collector is the real ``gpufleet collector`` process (tests/e2e/collector_process.py) with
the fault suite's short intervals, or a proxy in front of it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from agent.config import ShipperSettings
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.skew import SkewedClock, SkewedNode
from agent.sources.simulated.source import SimulatedNode
from agent.stats import AgentStats
from gpufleet.cli.demo_fleet import SimClock
from tests.faults.wire import SampleKey, Wire

TOKEN = "fault-suite-agent-token-5b1e0c"
#: seconds of simulated time between two samples of a node
STEP_SECONDS = 10.0
#: the collector's settings for every scenario (a scenario may add to them)
BASE_CONFIG: dict[str, Any] = {
    # below two steps: a sample missing between two the ledger has makes them unknown
    "analysis": {"stale_after_seconds": 1.5 * STEP_SECONDS},
    "ingest": {"apply_interval_seconds": 1.0, "commit_interval_seconds": 1.0},
}


def write_config(path: Path, extra: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    config: dict[str, dict[str, Any]] = {k: dict(v) for k, v in BASE_CONFIG.items()}
    for section, values in (extra or {}).items():
        config.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class SimAgent:
    node: SimulatedNode
    clock: SimClock
    sampler: Sampler
    shipper: Shipper
    stats: AgentStats
    wire: Wire
    node_clock: SkewedClock
    source: SkewedNode
    #: every sample the sampler produced, as sent (GPU, node-clock time stamp)
    produced: list[SampleKey] = field(default_factory=list)
    #: each GPU's first and last sample, simulated (true) time
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)

    def tick(self) -> None:
        true_now = self.clock()
        for sample in self.sampler.tick():
            self.produced.append((sample.gpu_uuid, sample.timestamp))
            first, _ = self.spans.get(sample.gpu_uuid, (true_now, true_now))
            self.spans[sample.gpu_uuid] = (first, true_now)

    def skew(self, seconds: float) -> None:
        """Step the node's clock to ``seconds`` off the true time (0: right again)."""
        self.node_clock.offset_seconds = self.source.offset_seconds = seconds

    def spooled(self) -> int:
        return self.stats.snapshot().spool_batches


def sim_agent(
    node: SimulatedNode, url: str, spool_dir: Path, start: float, **shipper: Any
) -> SimAgent:
    """The real agent parts for ``node``, its clock at ``start`` (simulated)."""
    clock = SimClock(start)
    stats, wire = AgentStats(), Wire()
    settings = ShipperSettings(url=url, token=TOKEN, spool_dir=spool_dir, **shipper)
    node_clock, source = SkewedClock(clock, 0.0), SkewedNode(node, 0.0)
    sender = Shipper(settings, node.name, stats, transport=wire, clock=node_clock)
    sampler = Sampler(source, stats, STEP_SECONDS, sink=sender, clock=node_clock)
    return SimAgent(node, clock, sampler, sender, stats, wire, node_clock, source)


def run_ticks(agents: Iterable[SimAgent], ticks: int, ship_every: int = 3) -> None:
    """``ticks`` sampling steps of every agent, each shipping every ``ship_every`` steps."""
    agents = list(agents)
    for n in range(ticks):
        for agent in agents:
            agent.clock.set(agent.clock() + STEP_SECONDS)
            agent.tick()
            if n % ship_every == ship_every - 1:
                agent.shipper.flush()


def drain(agents: Iterable[SimAgent], timeout_seconds: float = 30.0) -> None:
    """Ship what is buffered, then send until every spool is empty (the collector is up
    and taking batches)."""
    agents = list(agents)
    deadline = time.monotonic() + timeout_seconds
    while True:
        for agent in agents:
            agent.shipper.flush()
        if not any(a.spooled() for a in agents):
            return
        assert time.monotonic() < deadline, "spools did not drain: " + ", ".join(
            f"{a.node.name}: {a.spooled()}" for a in agents
        )


def spans_of(agents: Iterable[SimAgent]) -> dict[str, tuple[float, float]]:
    return {u: span for a in agents for u, span in a.spans.items()}


def status_of(url: str) -> int | None:
    """The HTTP status of GET ``url``; None when nothing answers."""
    try:
        return httpx.get(url, timeout=5.0).status_code
    except httpx.HTTPError:
        return None


def metric_total(base_url: str, name: str) -> float:
    """``name`` summed over its labels on ``/metrics`` (0.0 when absent)."""
    text = httpx.get(base_url + "/metrics", timeout=10.0).raise_for_status().text
    return sum(
        float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


def metric(base_url: str, name: str) -> float | None:
    """The value of an unlabelled sample ``name`` on ``/metrics``; None when absent."""
    text = httpx.get(base_url + "/metrics", timeout=10.0).raise_for_status().text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    return None
