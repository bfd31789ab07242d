"""One agent's read -> model -> export -> ship loop, driven tick by tick for the benchmarks.

``AgentLoop`` wires the agent's real objects as ``gpufleet agent`` does (source, Attributor,
Sampler, Shipper, AgentExporter with its XidTally) and steps them on a simulated 1 Hz
clock: every tick reads, every 5 ticks ships, every 15 ticks is scraped. Sources: the
simulator, or NvmlSource over a fake-NVML scenario through the real pynvml binding.

``python -m bench.agent_loop SOURCE SECONDS SINK_URL`` runs only this loop in a fresh
interpreter for SECONDS and prints its resident memory as JSON.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import memory_bytes_of

NODE = "bench-node"
GPUS = 8
SHIP_EVERY_TICKS = 5
SCRAPE_EVERY_TICKS = 15
SCENARIO = "h100_sxm_8x_gpm"
SOURCES = ("simulated", "nvml")


class TickClock:
    """Simulated 1 Hz time: each tick advances Unix and monotonic time by one second."""

    def __init__(self, unix_start: float) -> None:
        self._unix_start = unix_start
        self.elapsed_seconds = 0.0
        #: extra clocks moved along (the fake NVML library's FakeClock)
        self.followers: list[Any] = []

    def unix(self) -> float:
        return self._unix_start + self.elapsed_seconds

    def monotonic(self) -> float:
        return 1000.0 + self.elapsed_seconds

    def advance(self) -> None:
        self.elapsed_seconds += 1.0
        for follower in self.followers:
            follower.advance(1.0)


@dataclass
class LoopCpu:
    """Process CPU seconds per stage of the loop, summed over the measured ticks."""

    read_seconds: float = 0.0
    export_seconds: float = 0.0
    ship_seconds: float = 0.0
    #: thread CPU spent inside the fake NVML library (a Python stand-in for C code)
    fake_library_seconds: float = 0.0

    @property
    def total_seconds(self) -> float:
        return self.read_seconds + self.export_seconds + self.ship_seconds


class AgentLoop:
    """The agent's objects wired as ``gpufleet agent`` wires them, driven tick by tick."""

    def __init__(
        self, source: Any, clock: TickClock, dcgm_compat: bool, sink_url: str, work_dir: Path
    ) -> None:
        from prometheus_client import CollectorRegistry

        from agent.attribution.attributor import Attributor
        from agent.config import AttributionSettings, ShipperSettings
        from agent.metrics.exporter import AgentExporter, XidTally
        from agent.sampler import Sampler
        from agent.shipper import Shipper
        from agent.stats import AgentStats

        stats = AgentStats()
        attribution = AttributionSettings(
            kubelet_socket=work_dir / "kubelet.sock", gpustat_dir=work_dir / "gpustat"
        )
        self.annotator = Attributor(attribution, stats, monotonic=clock.monotonic)
        shipping = ShipperSettings(url=sink_url, spool_dir=work_dir / "spool")
        self.shipper = Shipper(shipping, NODE, stats)
        tally = XidTally()
        self.sampler = Sampler(
            source,
            stats,
            1.0,
            self.annotator,
            self.shipper,
            clock=clock.unix,
            monotonic=clock.monotonic,
            observers=[tally],
        )
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(
            AgentExporter(NODE, self.sampler.snapshot, stats, dcgm_compat, xid_tally=tally)
        )
        self.clock = clock
        self.ticks = 0

    def step(self, cpu: LoopCpu) -> None:
        """One tick, plus the ship and scrape that fall due on it; CPU charged per stage."""
        from prometheus_client import generate_latest

        self.ticks += 1
        self.clock.advance()
        cpu.read_seconds += _cpu_of(self.sampler.tick)
        if self.ticks % SHIP_EVERY_TICKS == 0:
            cpu.ship_seconds += _cpu_of(self.shipper.flush)
        if self.ticks % SCRAPE_EVERY_TICKS == 0:
            cpu.export_seconds += _cpu_of(lambda: generate_latest(self.registry))

    def close(self) -> None:
        self.shipper.close()
        self.annotator.close()


def _cpu_of(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


@contextlib.contextmanager
def opened_source(kind: str, clock: TickClock) -> Iterator[tuple[Any, list[float]]]:
    """The GPU source, and a one-item list the fake NVML library adds its CPU seconds to."""
    spent = [0.0]
    if kind == "simulated":
        from agent.sources.simulated.source import SimulatedNode

        yield SimulatedNode.build(NODE, ["H100"] * GPUS, start_time=clock.unix()), spent
        return
    from agent.config import SourceSettings
    from agent.sources.nvml.source import NvmlSource
    from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario

    fake_clock = FakeClock()
    clock.followers.append(fake_clock)
    with install_fake_nvml(load_scenario(SCENARIO), clock=fake_clock) as fake:
        meter_fake_library(fake, spent)
        source = NvmlSource(SourceSettings(), monotonic=fake_clock, sleep=fake_clock.sleep)
        try:
            yield source, spent
        finally:
            source.close()


def meter_fake_library(fake: Any, spent: list[float]) -> None:
    """Charge the thread CPU of every fake C call to ``spent[0]`` (calls come from workers)."""
    call, lock = fake.call, threading.Lock()

    def metered(name: str, implementation: Any, args: tuple[Any, ...]) -> Any:
        started = time.thread_time()
        try:
            return call(name, implementation, args)
        finally:
            with lock:
                spent[0] += time.thread_time() - started

    fake.call = metered


def run_child(kind: str, seconds: float, sink_url: str) -> None:
    """The ``--child`` role: only the agent loop in a fresh interpreter; prints its memory."""
    clock = TickClock(time.time())
    with (
        tempfile.TemporaryDirectory(prefix="bench-agent-child-") as tmp,
        opened_source(kind, clock) as (source, _),
    ):
        loop = AgentLoop(source, clock, True, sink_url, Path(tmp))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            loop.step(LoopCpu())
        rss, peak = memory_bytes_of()
        loop.close()
    print(json.dumps({"ticks": loop.ticks, "rss_bytes": rss, "peak_rss_bytes": peak}))


if __name__ == "__main__":
    run_child(sys.argv[1], float(sys.argv[2]), sys.argv[3])
