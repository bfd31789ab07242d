"""Recent per-GPU time series for the console's charts, kept in memory.

The ledger keeps hourly rollups, not samples; the workload page wants the last hours at
minute resolution. ``SeriesBuffer`` keeps, per GPU, one bucket per ``resolution_seconds``
for ``retention_seconds`` behind that GPU's newest sample: mean SM and DRAM activity, mean
power, peak memory used. A value no sample in the bucket reported stays None (never 0).

Memory per GPU is fixed: a ring of retention / resolution slots (360 by default) held in
typed arrays, sums and counts rather than values (80 bytes a slot, ~29 KB a GPU), so it
does not grow with the samples and adds no Python object per sample or bucket: keeping
every value at 1 Hz over 6 h would hold ~2.3 MB per GPU.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterable, Sequence

import msgspec

from agent.model import GpuSample
from collector.ledger.observers import StoredBatch
from collector.ledger.records import LedgerWrite

DEFAULT_RESOLUTION_SECONDS = 60.0
DEFAULT_RETENTION_SECONDS = 6 * 3600.0
_NONE = -1  # a memory slot no sample reported


class SeriesPoint(msgspec.Struct, frozen=True, kw_only=True):
    """One bucket of one GPU: ``start`` is the bucket's first second (Unix seconds)."""

    start: float
    samples: int
    sm_activity: float | None
    dram_activity: float | None
    power_watts: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None


class _Ring:
    """One GPU's buckets: slot ``index % size`` holds bucket ``index`` (``index`` =
    floor(time / resolution)); a slot's ``index`` says which bucket it holds now."""

    __slots__ = (
        "dram",
        "dram_n",
        "index",
        "memory",
        "memory_total",
        "newest",
        "power",
        "power_n",
        "samples",
        "sm",
        "sm_n",
    )

    def __init__(self, size: int) -> None:
        self.newest = -(2**62)  # the newest bucket index seen
        self.index = array("q", [-(2**62)]) * size
        self.samples = array("l", [0]) * size
        self.sm, self.dram, self.power = (array("d", [0.0]) * size for _ in range(3))
        self.sm_n, self.dram_n, self.power_n = (array("l", [0]) * size for _ in range(3))
        self.memory = array("q", [_NONE]) * size
        self.memory_total = array("q", [_NONE]) * size

    def add(self, index: int, sample: GpuSample) -> None:
        """Fold ``sample`` into bucket ``index``; the caller checked it is within retention."""
        slot = index % len(self.index)
        if self.index[slot] != index:  # the slot held a bucket past retention: reuse it
            self._reset(slot, index)
        self.samples[slot] += 1
        if (sm := sample.sm_activity) is not None:
            self.sm[slot] += sm
            self.sm_n[slot] += 1
        if (dram := sample.dram_activity) is not None:
            self.dram[slot] += dram
            self.dram_n[slot] += 1
        if (power := sample.power_watts) is not None:
            self.power[slot] += power
            self.power_n[slot] += 1
        if (memory := sample.memory_used_bytes) is not None and memory > self.memory[slot]:
            self.memory[slot] = memory
        if sample.memory_total_bytes is not None:
            self.memory_total[slot] = sample.memory_total_bytes

    def _reset(self, slot: int, index: int) -> None:
        self.index[slot] = index
        self.samples[slot] = self.sm_n[slot] = self.dram_n[slot] = self.power_n[slot] = 0
        self.sm[slot] = self.dram[slot] = self.power[slot] = 0.0
        self.memory[slot] = self.memory_total[slot] = _NONE

    def point(self, slot: int, resolution: float) -> SeriesPoint:
        sm_n, dram_n, power_n = self.sm_n[slot], self.dram_n[slot], self.power_n[slot]
        memory, total = self.memory[slot], self.memory_total[slot]
        return SeriesPoint(
            start=self.index[slot] * resolution,
            samples=self.samples[slot],
            sm_activity=self.sm[slot] / sm_n if sm_n else None,
            dram_activity=self.dram[slot] / dram_n if dram_n else None,
            power_watts=self.power[slot] / power_n if power_n else None,
            memory_used_bytes=None if memory == _NONE else memory,
            memory_total_bytes=None if total == _NONE else total,
        )


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
        #: buckets kept: those starting less than the retention before the newest one
        self._kept = math.ceil(retention_seconds / resolution_seconds)
        self._lock = threading.Lock()
        self._gpus: dict[str, _Ring] = {}

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        """As a ledger observer: every newly stored batch's samples are folded in."""
        for item in stored:
            self.add(item.batch.samples)

    def write_committed(self, write: LedgerWrite) -> None:
        """As a ledger observer: commits carry nothing the charts show."""

    def add(self, samples: Iterable[GpuSample]) -> None:
        """Fold samples in; a sample older than its GPU's retention is dropped."""
        resolution, kept = self.resolution_seconds, self._kept
        with self._lock:
            for sample in samples:
                if not math.isfinite(sample.timestamp):
                    continue
                ring = self._gpus.get(sample.gpu_uuid)
                if ring is None:
                    ring = self._gpus[sample.gpu_uuid] = _Ring(kept)
                index = math.floor(sample.timestamp / resolution)
                if index > ring.newest:
                    ring.newest = index
                elif not self._retained(index, ring.newest):
                    continue  # older than the retention behind the newest sample
                ring.add(index, sample)

    def _retained(self, index: int, newest: int) -> bool:
        """Whether bucket ``index`` starts less than the retention before bucket ``newest``."""
        return (newest - index) * self.resolution_seconds < self.retention_seconds

    def points(self, gpu_uuid: str, start: float, end: float) -> list[SeriesPoint] | None:
        """Buckets of ``gpu_uuid`` starting in [start, end); None for a GPU never seen."""
        resolution = self.resolution_seconds
        with self._lock:
            ring = self._gpus.get(gpu_uuid)
            if ring is None:
                return None
            slots = sorted(
                (index, slot)
                for slot, index in enumerate(ring.index)
                if self._retained(index, ring.newest) and start <= index * resolution < end
            )
            return [ring.point(slot, resolution) for _, slot in slots]

    def gpu_uuids(self) -> list[str]:
        with self._lock:
            return sorted(self._gpus)
