"""The agent's own health figures, shared by the source, shipper and exporter.

Thread-safe: the sampler, the shipper thread and the scrape thread all touch it.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StatsSnapshot:
    reads_total: int
    read_seconds_total: float
    last_read_seconds: float
    #: (gpu_uuid, field) -> errors; field is e.g. "power_watts" or "gpm"
    field_errors_total: dict[tuple[str, str], int]
    batches_sent_total: int
    batches_failed_total: int
    samples_sent_total: int
    #: batches dropped from the spool past its size/age bound
    spool_dropped_batches_total: int
    spool_dropped_samples_total: int
    spool_bytes: int
    spool_batches: int
    unhealthy_gpus: int
    #: refusals the sender can fix, by reason: the batch was kept (agent/refusals.py)
    batches_held_total: dict[str, int] = field(default_factory=dict)
    #: batches the collector refused for good, by reason (also in spool_dropped_*)
    batches_refused_total: dict[str, int] = field(default_factory=dict)
    batches_split_total: int = 0
    #: samples acks said fell behind event time the collector had already applied
    samples_late_total: int = 0
    #: the wait the collector last asked for (Retry-After, clamped); 0 after a delivery
    retry_after_seconds: float = 0.0
    #: batches the spool could not store, held in memory only
    memory_batches: int = 0


@dataclass
class AgentStats:
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _reads: int = 0
    _read_seconds: float = 0.0
    _last_read_seconds: float = 0.0
    _field_errors: Counter[tuple[str, str]] = field(default_factory=Counter)
    _batches_sent: int = 0
    _batches_failed: int = 0
    _samples_sent: int = 0
    _spool_dropped_batches: int = 0
    _spool_dropped_samples: int = 0
    _spool_bytes: int = 0
    _spool_batches: int = 0
    _unhealthy_gpus: int = 0
    _held: Counter[str] = field(default_factory=Counter)
    _refused: Counter[str] = field(default_factory=Counter)
    _splits: int = 0
    _samples_late: int = 0
    _retry_after_seconds: float = 0.0
    _memory_batches: int = 0

    def record_read(self, seconds: float, unhealthy_gpus: int = 0) -> None:
        with self._lock:
            self._reads += 1
            self._read_seconds += seconds
            self._last_read_seconds = seconds
            self._unhealthy_gpus = unhealthy_gpus

    def record_field_error(self, gpu_uuid: str, field_name: str) -> None:
        with self._lock:
            self._field_errors[(gpu_uuid, field_name)] += 1

    def record_batch_sent(self, samples: int) -> None:
        with self._lock:
            self._batches_sent += 1
            self._samples_sent += samples

    def record_batch_failed(self) -> None:
        with self._lock:
            self._batches_failed += 1

    def record_spool_drop(self, batches: int, samples: int) -> None:
        with self._lock:
            self._spool_dropped_batches += batches
            self._spool_dropped_samples += samples

    def set_spool_size(self, size_bytes: int, batches: int) -> None:
        with self._lock:
            self._spool_bytes = size_bytes
            self._spool_batches = batches

    def record_held(self, reason: str) -> None:
        with self._lock:
            self._held[reason] += 1

    def record_refused(self, reason: str) -> None:
        with self._lock:
            self._refused[reason] += 1

    def record_split(self) -> None:
        with self._lock:
            self._splits += 1

    def record_late(self, samples: int) -> None:
        with self._lock:
            self._samples_late += samples

    def set_retry_after(self, seconds: float) -> None:
        with self._lock:
            self._retry_after_seconds = seconds

    def set_memory_batches(self, batches: int) -> None:
        with self._lock:
            self._memory_batches = batches

    def snapshot(self) -> StatsSnapshot:
        with self._lock:
            return StatsSnapshot(
                reads_total=self._reads,
                read_seconds_total=self._read_seconds,
                last_read_seconds=self._last_read_seconds,
                field_errors_total=dict(self._field_errors),
                batches_sent_total=self._batches_sent,
                batches_failed_total=self._batches_failed,
                samples_sent_total=self._samples_sent,
                spool_dropped_batches_total=self._spool_dropped_batches,
                spool_dropped_samples_total=self._spool_dropped_samples,
                spool_bytes=self._spool_bytes,
                spool_batches=self._spool_batches,
                unhealthy_gpus=self._unhealthy_gpus,
                batches_held_total=dict(self._held),
                batches_refused_total=dict(self._refused),
                batches_split_total=self._splits,
                samples_late_total=self._samples_late,
                retry_after_seconds=self._retry_after_seconds,
                memory_batches=self._memory_batches,
            )
