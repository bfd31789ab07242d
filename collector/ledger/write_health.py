"""Whether the write path works: the truth behind ``/readyz``, ``/healthz`` and the
``gpufleet_collector_ready`` / ``..._ledger_up`` gauges.

A ledger that answers a read (``Ledger.ping``) can still refuse every write: a disk with
no space left, a file turned read-only, a value SQLite cannot hold. So readiness is judged
from the writes themselves, as they happen, by the two writers telling ``WriteHealth``:

- the applier after each ledger commit (``commit_ok`` / ``commit_failed``): the last
  attempt failing makes the collector not ready at once; the applier retries a failed
  commit on every tick (apply_interval_seconds), so the first one that succeeds after a
  recovery makes it ready again. A commit overdue past ``stale_after_seconds`` while
  applied changes wait (a stalled applier) is not ready either.
- the ingest queue after each batch-log append (``intake_ok`` / ``intake_failed``): a
  failed append makes the collector not ready for ``INTAKE_FAILURE_HOLD_SECONDS``, not
  until the next append succeeds. A pod that is not ready gets no traffic, so no append
  could prove a recovery; while the fault lasts, each retry that reaches the collector
  fails again and holds it not ready.

Beside what the writers report, the health check looks at the ledger volume's free space
(collector/ledger/files.py ``low_space``), which answers before the next commit is due.

Failures are counted by ``FailureReason`` (a bounded set: the metrics' ``reason`` label)
and logged at ERROR once per run of failures (and when the reason changes), with what to
do; the first success after a run is logged at WARNING.
"""

from __future__ import annotations

import errno
import logging
import math
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from collector.health import FailureReason
from gpufleet.durable import disk_full

log = logging.getLogger(__name__)

#: how long a failed batch-log append holds the collector not ready (see the docstring)
INTAKE_FAILURE_HOLD_SECONDS = 20.0
#: a commit is overdue at max(this many commit intervals, STALE_MIN_SECONDS)
STALE_COMMIT_INTERVALS = 3.0
STALE_MIN_SECONDS = 30.0


#: what to do, per reason, in the log line and in /readyz
ADVICE = {
    FailureReason.DISK_FULL: "free space on the volume holding the ledger and its intake log",
    FailureReason.READ_ONLY: "make the ledger file, its -wal/-shm files and its intake "
    "directory writable by the collector (check the volume's mount options)",
    FailureReason.OVERFLOW: "a value past what the ledger can hold reached a commit; see "
    "the quarantined batches and report it",
    FailureReason.OTHER: "see the error above and the collector's log",
}


def failure_reason(err: BaseException) -> FailureReason:
    """The reason of ``err`` or of any exception it was raised from."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OverflowError):
            return FailureReason.OVERFLOW
        if disk_full(seen):
            return FailureReason.DISK_FULL
        if isinstance(seen, OSError) and seen.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return FailureReason.READ_ONLY
        if isinstance(seen, sqlite3.Error):
            code = getattr(seen, "sqlite_errorcode", None)
            if code == sqlite3.SQLITE_FULL:
                return FailureReason.DISK_FULL
            if code is not None and code & 0xFF == sqlite3.SQLITE_READONLY:
                return FailureReason.READ_ONLY
        seen = seen.__cause__ or seen.__context__
    return FailureReason.OTHER


@dataclass(frozen=True, slots=True)
class WriteFailure:
    """The newest failure of one writer: since when its writes fail (the first failure
    of this run), when it last failed, why, and the error as raised."""

    since: float
    at: float
    reason: FailureReason
    error: str


@dataclass(frozen=True, slots=True)
class WriteState:
    """A snapshot for health and metrics (Unix seconds; None: never happened)."""

    last_commit_at: float | None
    #: the last commit attempt failed (None when it succeeded or none was made)
    commit_failure: WriteFailure | None
    #: the newest failed append, while it holds readiness (see INTAKE_FAILURE_HOLD_SECONDS)
    intake_failure: WriteFailure | None
    commit_failures: dict[str, int] = field(default_factory=dict)
    intake_failures: dict[str, int] = field(default_factory=dict)


class WriteHealth:
    """Thread-safe: the applier and the ingest thread report, health readers snapshot."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_commit_at: float | None = None
        self._commit_failure: WriteFailure | None = None
        self._intake_failure: WriteFailure | None = None
        self._commit_failures: Counter[str] = Counter()
        self._intake_failures: Counter[str] = Counter()

    def commit_ok(self) -> None:
        with self._lock:
            recovered, self._commit_failure = self._commit_failure, None
            self._last_commit_at = self._clock()
        if recovered is not None:
            log.warning("ledger commits succeed again (they failed: %s)", recovered.reason)

    def commit_failed(self, err: BaseException) -> None:
        with self._lock:
            before = self._commit_failure
            failure = self._commit_failure = self._failure(err, before)
            self._commit_failures[failure.reason] += 1
        if before is None or before.reason != failure.reason:
            log.error(
                "ledger commit failed (%s): %s; applied samples are kept and the commit is "
                "retried every apply interval; the collector is not ready until one "
                "succeeds. To fix: %s",
                failure.reason,
                failure.error,
                ADVICE[failure.reason],
            )

    def intake_ok(self) -> None:
        with self._lock:
            recovered, self._intake_failure = self._intake_failure, None
        if recovered is not None:
            log.warning("the intake log takes batches again (it failed: %s)", recovered.reason)

    def intake_failed(self, err: BaseException) -> None:
        with self._lock:
            before = self._intake_failure
            if before is not None and self._clock() - before.at > INTAKE_FAILURE_HOLD_SECONDS:
                before = None  # a new run of failures, logged again
            failure = self._intake_failure = self._failure(err, before)
            self._intake_failures[failure.reason] += 1
        if before is None or before.reason != failure.reason:
            log.error(
                "intake log append failed (%s): %s; batches are answered 503 (agents keep "
                "and resend them). To fix: %s",
                failure.reason,
                failure.error,
                ADVICE[failure.reason],
            )

    def state(self) -> WriteState:
        now = self._clock()
        with self._lock:
            intake = self._intake_failure
            if intake is not None and now - intake.at > INTAKE_FAILURE_HOLD_SECONDS:
                intake = None
            return WriteState(
                self._last_commit_at,
                self._commit_failure,
                intake,
                dict(self._commit_failures),
                dict(self._intake_failures),
            )

    def _failure(self, err: BaseException, before: WriteFailure | None) -> WriteFailure:
        now = self._clock()
        since = before.since if before is not None else now
        return WriteFailure(since, now, failure_reason(err), f"{type(err).__name__}: {err}")


def stale_after_seconds(commit_interval_seconds: float) -> float:
    """How old the last commit may be while applied changes wait, before it is overdue."""
    return max(STALE_COMMIT_INTERVALS * commit_interval_seconds, STALE_MIN_SECONDS)


def write_problems(
    state: WriteState, waiting_since: float | None, commit_interval_seconds: float, now: float
) -> list[str]:
    """What fails in the write path, each naming what to do; empty when it works.
    ``waiting_since``: since when applied changes wait for a commit (None: nothing waits)."""
    problems = []
    if (failure := state.commit_failure) is not None:
        problems.append(
            f"ledger commits fail since {_ago(failure.since, now)} ({failure.reason}: "
            f"{failure.error}); {ADVICE[failure.reason]}"
        )
    if (failure := state.intake_failure) is not None:
        problems.append(
            f"the intake log could not store a batch {_ago(failure.at, now)} (failing since "
            f"{_ago(failure.since, now)}) "
            f"({failure.reason}: {failure.error}); {ADVICE[failure.reason]}"
        )
    stale = stale_after_seconds(commit_interval_seconds)
    last = state.last_commit_at if state.last_commit_at is not None else -math.inf
    if waiting_since is not None and now - max(last, waiting_since) > stale:
        problems.append(
            f"no ledger commit for {now - max(last, waiting_since):.0f} s while applied "
            f"samples wait (overdue after {stale:g} s); is the apply job running?"
        )
    return problems


def _ago(at: float, now: float) -> str:
    return f"{max(now - at, 0.0):.0f} s ago"
