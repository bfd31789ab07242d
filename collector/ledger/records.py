"""The records the ledger stores and returns, and the one write it takes per commit.

Time is Unix seconds, memory bytes, activity a 0..1 ratio. Nothing here does I/O.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import msgspec

from collector.ledger.histogram import MEMORY_BUCKETS, SM_ACTIVITY_BUCKETS
from collector.records import IdleEpisode, Usage, WorkloadRef

_GZIP_MAGIC = b"\x1f\x8b"


def batch_json(body: bytes) -> bytes:
    """The JSON of a batch body kept as the agent sent it (gzip-compressed or not; JSON
    never starts with gzip's magic bytes)."""
    return gzip.decompress(body) if body[:2] == _GZIP_MAGIC else body


class Observed(Protocol):
    """What right-sizing statistics read of an interval (a ``records.Interval``)."""

    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def memory_used_bytes(self) -> int | None: ...
    @property
    def sm_activity(self) -> float | None: ...


class _Observed(NamedTuple):
    start: float
    end: float
    memory_used_bytes: int | None
    sm_activity: float | None


class LedgerError(Exception):
    """The ledger cannot be opened, migrated, read or written; the message says why."""


@dataclass(frozen=True, slots=True)
class GpuRecord:
    """A GPU (or MIG instance) the collector has seen, as registered in the ledger."""

    uuid: str
    node: str
    model: str  # canonical price-book model, e.g. "H100"
    name: str  # NVML name
    index: int
    first_seen: float
    last_seen: float
    #: msgspec JSON of the agent's ``GpuInfo`` (decode with ``msgspec.json.decode``)
    info_json: bytes = b"{}"
    mig_parent_uuid: str | None = None
    mig_profile: str | None = None


class GpuCursor(msgspec.Struct, frozen=True, gc=False):
    """How far one GPU's samples have been applied, committed with the deltas they made.

    ``last_sample`` is the msgspec JSON of the last applied ``GpuSample``: after a restart
    the next interval's energy delta starts from it. ``open_episode_*`` describe the idle
    episode running at ``applied_until`` (None when the GPU was not idle).
    """

    gpu_uuid: str
    applied_until: float
    last_sample: bytes
    open_episode_start: float | None = None
    open_episode_workload: str | None = None


@dataclass(slots=True)
class WorkloadStatsDelta:
    """What one commit adds to a workload's right-sizing statistics.

    Histograms map a bucket index (``MEMORY_BUCKETS`` / ``SM_ACTIVITY_BUCKETS`` in
    ledger_histogram) to the seconds spent there; merged histograms give p95 within 4 %
    (see ledger_histogram). Memory is per GPU: one sample of one GPU the workload holds.
    ``gpu_model``/``gpu_count`` and ``last_seen`` replace the stored ones when set.
    """

    observed_seconds: float = 0.0
    memory_seconds: dict[int, float] = field(default_factory=dict)
    sm_activity_seconds: dict[int, float] = field(default_factory=dict)
    memory_peak_bytes: int = 0
    sm_activity_peak: float = 0.0
    gpu_model: str = ""
    gpu_count: int = 0
    last_seen: float = 0.0
    #: (memory, bucket) last binned: memory in use seldom changes between samples
    _memory_bucket: tuple[int, int] = field(default=(-1, 0), repr=False, compare=False)

    def observe(
        self, seconds: float, memory_used_bytes: int | None, sm_activity: float | None
    ) -> None:
        """Add one interval of ``seconds``; None readings count as observed, not binned."""
        self.observe_all((_Observed(0.0, seconds, memory_used_bytes, sm_activity),))

    def observe_all(self, intervals: Iterable[Observed]) -> None:
        """``observe`` each interval (its seconds, and the memory and SM activity held).

        Runs once per applied sample: histograms and peaks are kept in locals."""
        memory_hist, sm_hist = self.memory_seconds, self.sm_activity_seconds
        memory_index, sm_index = MEMORY_BUCKETS.index, SM_ACTIVITY_BUCKETS.index
        last_memory, memory_bucket = self._memory_bucket
        memory_peak, sm_peak = self.memory_peak_bytes, self.sm_activity_peak
        observed = 0.0
        for interval in intervals:
            seconds = interval.end - interval.start
            observed += seconds
            memory = interval.memory_used_bytes
            if memory is not None:
                if memory != last_memory:  # memory in use seldom changes between samples
                    last_memory, memory_bucket = memory, memory_index(memory)
                memory_hist[memory_bucket] = memory_hist.get(memory_bucket, 0.0) + seconds
                if memory > memory_peak:
                    memory_peak = memory
            sm = interval.sm_activity
            if sm is not None:
                bucket = sm_index(sm)
                sm_hist[bucket] = sm_hist.get(bucket, 0.0) + seconds
                if sm > sm_peak:
                    sm_peak = sm
        self.observed_seconds += observed
        self._memory_bucket = (last_memory, memory_bucket)
        self.memory_peak_bytes, self.sm_activity_peak = memory_peak, sm_peak

    def merge(self, other: WorkloadStatsDelta) -> None:
        """Add ``other``'s observations (seconds, histograms, peaks), not its model,
        count or last-seen."""
        self.observed_seconds += other.observed_seconds
        for mine, theirs in (
            (self.memory_seconds, other.memory_seconds),
            (self.sm_activity_seconds, other.sm_activity_seconds),
        ):
            for bucket, seconds in theirs.items():
                mine[bucket] = mine.get(bucket, 0.0) + seconds
        self.memory_peak_bytes = max(self.memory_peak_bytes, other.memory_peak_bytes)
        self.sm_activity_peak = max(self.sm_activity_peak, other.sm_activity_peak)


@dataclass(slots=True)
class LedgerWrite:
    """Everything one ``Ledger.commit`` applies, in one transaction.

    Usage deltas are ADDED to the hourly rows and to the all-time totals; registries,
    cursors and stats' last-seen fields are upserted; ``batches_done`` names pending
    batches whose every sample is now applied (they are deleted). Only new or changed
    registry entries need to be included, but every GPU/workload a delta, cursor or
    episode names must be registered (in this write or an earlier one).
    """

    #: (hour_start, gpu_uuid) -> delta; hour_start is a multiple of 3600 (UTC hours)
    gpu_usage: dict[tuple[float, str], Usage] = field(default_factory=dict)
    #: (hour_start, workload_key) -> delta
    workload_usage: dict[tuple[float, str], Usage] = field(default_factory=dict)
    workloads: dict[str, WorkloadRef] = field(default_factory=dict)
    gpus: dict[str, GpuRecord] = field(default_factory=dict)
    cursors: dict[str, GpuCursor] = field(default_factory=dict)
    episodes_closed: list[IdleEpisode] = field(default_factory=list)
    batches_done: list[int] = field(default_factory=list)
    workload_stats: dict[str, WorkloadStatsDelta] = field(default_factory=dict)
