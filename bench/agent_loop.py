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


#: the fake-NVML scenario's GPU processes; the loop gives each a pod cgroup under work_dir
SCENARIO_PIDS = (4242, 5001, 5002)


def host_tree(work_dir: Path) -> tuple[Path, Path]:
    """A /proc and a cgroup v2 tree for ``SCENARIO_PIDS``: one burstable pod each, limited."""
    proc, cgroup = work_dir / "proc", work_dir / "cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "cgroup.controllers").write_text("cpu memory\n")
    for n, pid in enumerate(SCENARIO_PIDS):
        uid = f"00000000-0000-4000-8000-{n:012d}"
        qos = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable"
        pod = f"{qos}-pod{uid.replace('-', '_')}.slice"
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(f"0::{pod}/cri-containerd-{n:064x}.scope\n")
        (proc / str(pid) / "comm").write_text("python\n")
        d = cgroup / pod.lstrip("/")
        d.mkdir(parents=True)
        (d / "cpu.stat").write_text("usage_usec 123456789\nnr_periods 1000\nnr_throttled 10\n")
        (d / "cpu.max").write_text("400000 100000\n")
        (d / "memory.pressure").write_text("some avg10=0.50 avg60=0.10 avg300=0.00 total=1\n")
        (d / "memory.current").write_text(f"{8 << 30}\n")
        (d / "memory.max").write_text(f"{64 << 30}\n")
    return proc, cgroup


class AgentLoop:
    """The agent's objects wired as ``gpufleet agent`` wires them, driven tick by tick.

    ``host_usage``: the workloads' host CPU and memory too (the simulator's own readings,
    or on NVML a CgroupHostReader over ``host_tree``); NVML runs attribute from that
    fixture /proc either way, so the two differ only by the host reads.
    """

    def __init__(
        self,
        source: Any,
        clock: TickClock,
        dcgm_compat: bool,
        sink_url: str,
        work_dir: Path,
        host_usage: bool = False,
    ) -> None:
        from prometheus_client import CollectorRegistry

        from agent.attribution.attributor import Attributor
        from agent.attribution.host_usage import CgroupHostReader
        from agent.attribution.proc import ProcReader
        from agent.config import AttributionSettings, ShipperSettings
        from agent.metrics.exporter import AgentExporter, XidTally
        from agent.sampler import Sampler
        from agent.shipper import Shipper
        from agent.stats import AgentStats

        stats = AgentStats()
        simulated = hasattr(source, "read_hosts")
        proc, cgroup = (Path("/proc"), None) if simulated else host_tree(work_dir)
        attribution = AttributionSettings(
            kubelet_socket=work_dir / "kubelet.sock",
            gpustat_dir=work_dir / "gpustat",
            proc_root=proc,
            squeue_path="",
        )
        procs = ProcReader(proc, attribution.refresh_seconds, clock.monotonic)
        self.annotator = Attributor(attribution, stats, clock.monotonic, procs=procs)
        hosts: Any = None
        if host_usage:
            hosts = (
                source
                if cgroup is None
                else CgroupHostReader(procs, cgroup, stats, monotonic=clock.monotonic)
            )
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
            hosts=hosts,
        )
        self.registry = CollectorRegistry(auto_describe=True)
        exporter = AgentExporter(
            NODE,
            self.sampler.snapshot,
            stats,
            dcgm_compat,
            xid_tally=tally,
            hosts=self.sampler.host_snapshot if host_usage else None,
        )
        self.registry.register(exporter)
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


def run_child(kind: str, seconds: float, sink_url: str, host_usage: bool = True) -> None:
    """The ``--child`` role: only the agent loop in a fresh interpreter; prints its memory."""
    clock = TickClock(time.time())
    with (
        tempfile.TemporaryDirectory(prefix="bench-agent-child-") as tmp,
        opened_source(kind, clock) as (source, _),
    ):
        loop = AgentLoop(source, clock, True, sink_url, Path(tmp), host_usage)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            loop.step(LoopCpu())
        rss, peak = memory_bytes_of()
        loop.close()
    print(json.dumps({"ticks": loop.ticks, "rss_bytes": rss, "peak_rss_bytes": peak}))


if __name__ == "__main__":
    run_child(sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:] != ["--no-host-usage"])
