"""Recent per-GPU time series for the console's charts, kept in memory.

The ledger keeps hourly rollups, not samples; the workload page wants the last hours at
minute resolution. ``SeriesBuffer`` keeps, per GPU, one bucket per ``resolution_seconds``
for ``retention_seconds`` behind that GPU's newest sample: mean SM and DRAM activity, mean
power, peak memory used. A value no sample in the bucket reported stays None (never 0).
Memory per GPU is bounded: retention / resolution buckets (360 by default).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Iterable

import msgspec

from agent.model import GpuSample

DEFAULT_RESOLUTION_SECONDS = 60.0
DEFAULT_RETENTION_SECONDS = 6 * 3600.0


class SeriesPoint(msgspec.Struct, frozen=True, kw_only=True):
    """One bucket of one GPU: ``start`` is the bucket's first second (Unix seconds)."""

    start: float
    samples: int
    sm_activity: float | None
    dram_activity: float | None
    power_watts: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None


class _Bucket:
    __slots__ = ("dram", "memory", "memory_total", "power", "samples", "sm", "start")

    def __init__(self, start: float) -> None:
        self.start = start
        self.samples = 0
        self.sm: list[float] = []
        self.dram: list[float] = []
        self.power: list[float] = []
        self.memory: int | None = None
        self.memory_total: int | None = None

    def add(self, sample: GpuSample) -> None:
        self.samples += 1
        for values, value in (
            (self.sm, sample.sm_activity),
            (self.dram, sample.dram_activity),
            (self.power, sample.power_watts),
        ):
            if value is not None:
                values.append(value)
        if sample.memory_used_bytes is not None:
            self.memory = max(self.memory or 0, sample.memory_used_bytes)
        if sample.memory_total_bytes is not None:
            self.memory_total = sample.memory_total_bytes

    def point(self) -> SeriesPoint:
        return SeriesPoint(
            start=self.start,
            samples=self.samples,
            sm_activity=_mean(self.sm),
            dram_activity=_mean(self.dram),
            power_watts=_mean(self.power),
            memory_used_bytes=self.memory,
            memory_total_bytes=self.memory_total,
        )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class SeriesBuffer:
    """Thread-safe ring of recent buckets per GPU uuid."""

    def __init__(
        self,
        resolution_seconds: float = DEFAULT_RESOLUTION_SECONDS,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
    ) -> None:
        if resolution_seconds <= 0 or retention_seconds < resolution_seconds:
            raise ValueError("series: need 0 < resolution_seconds <= retention_seconds")
        self.resolution_seconds = resolution_seconds
        self.retention_seconds = retention_seconds
        self._lock = threading.Lock()
        self._gpus: dict[str, deque[_Bucket]] = {}

    def add(self, samples: Iterable[GpuSample]) -> None:
        """Fold samples in; a sample older than its GPU's retention is dropped."""
        with self._lock:
            for sample in samples:
                if math.isfinite(sample.timestamp):
                    self._add(sample)

    def _add(self, sample: GpuSample) -> None:
        start = math.floor(sample.timestamp / self.resolution_seconds) * self.resolution_seconds
        buckets = self._gpus.setdefault(sample.gpu_uuid, deque())
        if not buckets or start > buckets[-1].start:
            buckets.append(_Bucket(start))
            horizon = start - self.retention_seconds
            while buckets[0].start <= horizon:
                buckets.popleft()
            buckets[-1].add(sample)
            return
        for position in range(len(buckets) - 1, -1, -1):  # late sample: search from the end
            bucket = buckets[position]
            if bucket.start == start:
                bucket.add(sample)
                return
            if bucket.start < start:
                buckets.insert(position + 1, _Bucket(start))
                buckets[position + 1].add(sample)
                return
        if start > buckets[-1].start - self.retention_seconds:
            buckets.appendleft(_Bucket(start))
            buckets[0].add(sample)

    def points(self, gpu_uuid: str, start: float, end: float) -> list[SeriesPoint] | None:
        """Buckets of ``gpu_uuid`` starting in [start, end); None for a GPU never seen."""
        with self._lock:
            buckets = self._gpus.get(gpu_uuid)
            if buckets is None:
                return None
            return [b.point() for b in buckets if start <= b.start < end]

    def gpu_uuids(self) -> list[str]:
        with self._lock:
            return sorted(self._gpus)
