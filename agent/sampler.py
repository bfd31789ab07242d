"""The sampling loop: read every GPU, attribute it, keep the latest, hand it to the shipper."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from agent.model import GpuInfo, GpuSample, WorkloadHostSample
from agent.sources.interface import GpuSource
from agent.stats import AgentStats

log = logging.getLogger(__name__)

#: re-list the GPUs this often, so a re-initialised NVML or a MIG change shows up
DISCOVER_EVERY_SECONDS = 60.0


class Annotator(Protocol):
    def annotate(
        self, gpus: Sequence[GpuInfo], samples: Sequence[GpuSample]
    ) -> list[GpuSample]: ...


class Observer(Protocol):
    def observe(self, sample: GpuSample) -> None: ...


class HostReader(Protocol):
    """Per-workload host CPU and memory for the workloads holding ``samples``' GPUs."""

    def read_hosts(self, samples: Sequence[GpuSample], now: float) -> list[WorkloadHostSample]: ...


class Sink(Protocol):
    def submit(
        self,
        gpus: Sequence[GpuInfo],
        samples: Sequence[GpuSample],
        hosts: Sequence[WorkloadHostSample] = (),
    ) -> None: ...


class Sampler:
    """Reads ``source`` every ``interval_seconds`` of wall time.

    ``clock`` gives the event time stamped on samples (the demo passes a simulated clock);
    ``monotonic`` measures read latency and paces the loop.
    """

    def __init__(
        self,
        source: GpuSource,
        stats: AgentStats,
        interval_seconds: float,
        annotator: Annotator | None = None,
        sink: Sink | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        observers: Sequence[Observer] = (),
        hosts: HostReader | None = None,
    ) -> None:
        self._source = source
        self._stats = stats
        self._interval_seconds = interval_seconds
        self._annotator = annotator
        self._sink = sink
        self._clock = clock
        self._monotonic = monotonic
        #: see every sample, not only the ones a scrape catches (the XID tally)
        self._observers = tuple(observers)
        #: the workloads' host CPU and memory (issue 24), shipped with the samples
        self._hosts = hosts
        self._lock = threading.Lock()
        self._gpus: list[GpuInfo] = []
        self._latest: dict[str, GpuSample] = {}
        self._latest_hosts: list[WorkloadHostSample] = []
        self._discovered_at: float | None = None

    def tick(self) -> list[GpuSample]:
        """Read every GPU once; returns the (attributed) samples."""
        started = self._monotonic()
        gpus = self._discover(started)
        now = self._clock()
        samples = self._source.read(now)
        if self._annotator is not None:
            samples = self._annotator.annotate(gpus, samples)
        # the one place a read is counted: the sampler sees every source (NVML, simulated, replay)
        unhealthy = sum(1 for s in samples if not s.healthy)
        self._stats.record_read(self._monotonic() - started, unhealthy_gpus=unhealthy)
        with self._lock:
            for sample in samples:
                self._latest[sample.gpu_uuid] = sample
        for observer in self._observers:
            for sample in samples:
                observer.observe(sample)
        hosts = self._hosts.read_hosts(samples, now) if self._hosts is not None else []
        with self._lock:
            self._latest_hosts = hosts
        if self._sink is not None:
            self._sink.submit(gpus, samples, hosts)
        return samples

    def snapshot(self) -> tuple[list[GpuInfo], list[GpuSample]]:
        """The GPUs and the latest sample of each, for the exporter."""
        with self._lock:
            known = {g.uuid for g in self._gpus}
            return list(self._gpus), [s for u, s in self._latest.items() if u in known]

    def host_snapshot(self) -> list[WorkloadHostSample]:
        """The host samples of the latest tick, for the exporter."""
        with self._lock:
            return list(self._latest_hosts)

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set; a failing tick is logged and the loop goes on."""
        next_at = self._monotonic()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # one bad tick must not end the agent
                log.exception("sampling failed; retrying next interval")
            next_at += self._interval_seconds
            delay = next_at - self._monotonic()
            if delay < 0:  # fell behind (slow NVML): skip missed ticks, don't burst
                next_at = self._monotonic()
                delay = 0.0
            stop.wait(delay)

    def _discover(self, now_monotonic: float) -> list[GpuInfo]:
        stale = (
            self._discovered_at is None
            or now_monotonic - self._discovered_at >= DISCOVER_EVERY_SECONDS
        )
        if stale:
            gpus = self._source.discover()
            with self._lock:
                self._gpus = gpus
                known = {g.uuid for g in gpus}
                self._latest = {u: s for u, s in self._latest.items() if u in known}
            self._discovered_at = now_monotonic
        return self._gpus
