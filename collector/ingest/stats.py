"""Ingest self-metrics: what the collector accepted, ignored and refused since it started."""

from __future__ import annotations

import threading
from collections import Counter

from collector.backend import ImplausibleField, IngestCounters, LateReason, RejectReason


class IngestStats:
    """Thread-safe counters; ``snapshot`` gives the exporter an immutable copy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: Counter[str] = Counter()
        self._rejected_batches: Counter[str] = Counter()
        self._rejected_samples: Counter[str] = Counter()
        self._samples = 0
        self._late: Counter[str] = Counter()
        self._implausible: Counter[str] = Counter()
        self._seconds = 0.0
        self.last_ingest_at: float | None = None

    def count_batch(
        self, result: str, samples: int = 0, seconds: float = 0.0, at: float | None = None
    ) -> None:
        with self._lock:
            self._batches[result] += 1
            self._samples += samples
            self._seconds += seconds
            if at is not None:
                self.last_ingest_at = at

    def count_rejected(self, reason: RejectReason, samples: int) -> None:
        with self._lock:
            self._rejected_batches[reason.value] += 1
            self._rejected_samples[reason.value] += samples

    def count_late(self, samples: int, reason: LateReason) -> None:
        with self._lock:
            self._late[reason.value] += samples

    def count_implausible(self, field: ImplausibleField, samples: int) -> None:
        with self._lock:
            self._implausible[field.value] += samples

    def snapshot(self) -> IngestCounters:
        with self._lock:
            return IngestCounters(
                batches_accepted=self._batches["accepted"],
                batches_duplicate=self._batches["duplicate"],
                batches_rejected=dict(self._rejected_batches),
                samples_accepted=self._samples,
                samples_rejected=dict(self._rejected_samples),
                late_samples=sum(self._late.values()),
                late_samples_by_reason=dict(self._late),
                implausible_samples=dict(self._implausible),
                ingest_seconds=self._seconds,
            )
