"""The write path's health as the edge reports it: why writes fail, what is quarantined,
the backlog (``WritePath``, part of backend.HealthReport), and what ``GET /readyz`` answers.

Plain data, no I/O: collector/ledger/write_health.py and quarantine.py fill it in, the HTTP
edge and the exporter read it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import msgspec


class FailureReason(enum.StrEnum):
    """Why a ledger commit or a batch-log append failed; the metrics' ``reason`` label."""

    DISK_FULL = "disk_full"
    READ_ONLY = "read_only"
    #: a value the ledger cannot hold (an integer past SQLite's 64 bits)
    OVERFLOW = "overflow"
    OTHER = "other"


class QuarantinedBatch(msgspec.Struct, frozen=True):
    """A batch set aside because it cannot be applied (collector/ledger/quarantine.py
    keeps this as ``<id>.json``): its identity, when and why."""

    batch_id: int
    node: str
    agent_boot_id: str
    seq: int
    received_at: float
    sample_count: int
    quarantined_at: float
    error: str


@dataclass(frozen=True, slots=True)
class WritePath:
    """The write path's state, for ``/healthz``, ``/readyz`` and ``/metrics`` (Unix s)."""

    #: the last successful ledger commit; None before the first of this process
    last_commit_at: float | None = None
    #: ledger commits failed since the start, by reason (disk_full, read_only, ...)
    commit_failures: dict[str, int] = field(default_factory=dict)
    #: batch-log appends failed since the start (each answered 503), by reason
    intake_failures: dict[str, int] = field(default_factory=dict)
    #: acknowledged batches not yet applied: count, bytes as stored, the oldest's arrival
    backlog_batches: int = 0
    backlog_bytes: int = 0
    oldest_pending_at: float | None = None
    quarantined_batches: int = 0
    newest_quarantined: QuarantinedBatch | None = None


@dataclass(frozen=True, slots=True)
class ReadinessResponse:
    """``GET /readyz``: 200 when ``ready``, else 503 with what fails and what to do."""

    ready: bool
    problems: tuple[str, ...] = ()
