"""The optional InfluxDB sink: raw samples and hourly rollups, written in the background.

Callers (the ledger, as it makes batches durable and commits rollups) only enqueue: a
bounded queue of points in memory. One worker thread turns queued work into line protocol
(collector.influx.points) and writes it synchronously through a ``PointWriter``. When the
server is down the queue fills to ``queue_max_points``, then the oldest points are
dropped and counted; the worker retries with exponential backoff and resumes by itself.
At every moment: enqueued = written + dropped + queued (``SinkCounters``).

Hourly rollups are read from the ledger when their turn comes, so a queued rollup always
carries the hour's latest totals; a (hour, workload) already waiting is not queued twice.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from collector.influx.points import batch_lines, rollup_lines
from collector.influx.settings import InfluxSettings
from collector.records import HOUR_SECONDS, Usage, WorkloadRef

log = logging.getLogger(__name__)


class InfluxWriteError(Exception):
    """A write failed. ``retryable`` is False when resending the same points cannot help
    (the server refused them as malformed, too large or outside retention)."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class PointWriter(Protocol):
    def write(self, lines: Sequence[str]) -> None:
        """Write line-protocol lines; raises InfluxWriteError."""

    def close(self) -> None: ...


#: (start, end) -> per-workload usage summed over hourly rows in [start, end); Ledger has it
RollupReader = Callable[[float, float], list[tuple[WorkloadRef, Usage]]]


@dataclass(frozen=True, slots=True)
class SinkCounters:
    """Points since start. enqueued == written + sum(dropped.values()) + queued."""

    enqueued: int
    written: int
    #: reason -> points: "overflow" (queue full), "rejected" (server refused), "shutdown",
    #: "unreadable" (a rollup or batch that could not be turned into points)
    dropped: dict[str, int]
    #: waiting in the queue plus the chunk being written
    queued: int
    write_failures: int


@dataclass(slots=True)
class _Work:
    """Queued work: a batch's JSON body, or rollup keys per hour; built into lines late."""

    points: int
    body: bytes | None = None
    rollups: dict[float, set[str]] | None = None
    lines: list[str] | None = None


class InfluxSink:
    def __init__(
        self,
        writer: PointWriter,
        settings: InfluxSettings,
        rollups: RollupReader,
        currency: str = "",
    ) -> None:
        self.settings = settings
        self._writer = writer
        self._rollups = rollups
        self._currency = currency
        self._cond = threading.Condition()
        self._queue: deque[_Work] = deque()
        self._queued = 0  # points in _queue
        self._in_flight = 0  # points taken by the worker, not yet written or dropped
        self._waiting_rollups: set[tuple[float, str]] = set()
        self._enqueued = 0
        self._written = 0
        self._dropped: dict[str, int] = {}
        self._failures = 0
        self._failing = False  # since the last success: log the change, not every retry
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- producers: enqueue only -----------------------------------------------------------

    def add_batch(self, body: bytes, samples: int) -> None:
        """Queue a batch's samples (``body`` as the ledger keeps it; one point per sample)."""
        if samples > 0:
            self._put(_Work(points=samples, body=body))

    def add_rollups(self, keys: Sequence[tuple[float, str]]) -> None:
        """Queue the (hour_start, workload_key) rollups a ledger commit touched."""
        with self._cond:
            fresh = [k for k in keys if k not in self._waiting_rollups]
            if not fresh:
                return
            self._waiting_rollups.update(fresh)
            hours: dict[float, set[str]] = {}
            for hour, key in fresh:
                hours.setdefault(hour, set()).add(key)
            self._put(_Work(points=len(fresh), rollups=hours))

    def _put(self, work: _Work) -> None:
        with self._cond:
            self._queue.append(work)
            self._queued += work.points
            self._enqueued += work.points
            self._trim()
            if self._queued >= self.settings.batch_points:
                self._cond.notify()

    def _trim(self) -> None:
        """Drop the oldest queued work until the queue fits its bound (lock held)."""
        while self._queued > self.settings.queue_max_points and self._queue:
            oldest = self._queue.popleft()
            self._queued -= oldest.points
            self._forget(oldest)
            self._count_dropped("overflow", oldest.points)

    def _forget(self, work: _Work) -> None:
        if work.rollups is not None and work.lines is None:
            for hour, keys in work.rollups.items():
                self._waiting_rollups.difference_update((hour, k) for k in keys)

    def _count_dropped(self, reason: str, points: int) -> None:
        if points:
            self._dropped[reason] = self._dropped.get(reason, 0) + points

    # -- observation ---------------------------------------------------------------------

    def counters(self) -> SinkCounters:
        with self._cond:
            return SinkCounters(
                enqueued=self._enqueued,
                written=self._written,
                dropped=dict(self._dropped),
                queued=self._queued + self._in_flight,
                write_failures=self._failures,
            )

    # -- the worker ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="influx-sink", daemon=True)
        self._thread.start()

    def close(self, timeout_seconds: float = 10.0) -> None:
        """Write what is queued (one try per chunk), stop the worker, close the writer.
        Points still queued after that are counted as dropped ("shutdown")."""
        self._stopping.set()
        with self._cond:
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout_seconds)
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._count_dropped("shutdown", self._queued)
                self._queue.clear()
                self._queued = 0
        self._writer.close()

    def _run(self) -> None:
        backoff = self.settings.retry_initial_seconds
        while True:
            chunk = self._take()
            if chunk is None:
                return
            if self._write(chunk):
                backoff = self.settings.retry_initial_seconds
                continue
            if self._stopping.is_set():
                self._give_back(chunk)
                return
            self._give_back(chunk)
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, self.settings.retry_max_seconds)

    def _take(self) -> list[_Work] | None:
        """Wait for a full chunk or the flush interval; None once stopping and empty."""
        with self._cond:
            if self._queued < self.settings.batch_points and not self._stopping.is_set():
                self._cond.wait(self.settings.flush_interval_seconds)
            if not self._queue:
                return None if self._stopping.is_set() else []
            chunk: list[_Work] = []
            while self._queue and (not chunk or self._in_flight < self.settings.batch_points):
                work = self._queue.popleft()
                self._queued -= work.points
                self._in_flight += work.points
                self._forget(work)
                chunk.append(work)
            return chunk

    def _write(self, chunk: list[_Work]) -> bool:
        """Build and write one chunk; True unless a retryable failure left it unwritten."""
        lines = [line for work in chunk for line in self._lines(work)]
        try:
            if lines:
                self._writer.write(lines)
        except InfluxWriteError as err:
            self._note_failure(err)
            if err.retryable:
                return False
            self._finish(chunk, "rejected")
            return True
        self._finish(chunk, None)
        return True

    def _lines(self, work: _Work) -> list[str]:
        if work.lines is None:
            try:
                work.lines = self._build(work)
            except Exception:  # a bad body or a ledger read failing must not stop the sink
                log.exception("influx sink: cannot build points; dropping %d", work.points)
                work.lines = []
            with self._cond:  # what could not be built is dropped, once
                self._count_dropped("unreadable", work.points - len(work.lines))
                self._in_flight -= work.points - len(work.lines)
                work.points = len(work.lines)
        return work.lines

    def _build(self, work: _Work) -> list[str]:
        if work.body is not None:
            return batch_lines(work.body)
        lines: list[str] = []
        for hour, keys in sorted((work.rollups or {}).items()):
            rows = self._rollups(hour, hour + HOUR_SECONDS)
            wanted = [(ref, usage) for ref, usage in rows if ref.key in keys]
            lines.extend(rollup_lines(hour, wanted, self._currency))
        return lines

    def _finish(self, chunk: list[_Work], dropped_reason: str | None) -> None:
        points = sum(work.points for work in chunk)
        with self._cond:
            self._in_flight -= points
            if dropped_reason is None:
                self._written += points
            else:
                self._count_dropped(dropped_reason, points)
            recovered, self._failing = self._failing and dropped_reason is None, False
        if recovered:
            log.info("influx sink: writing again")

    def _give_back(self, chunk: list[_Work]) -> None:
        """A failed chunk goes back to the head of the queue: it is the oldest data."""
        with self._cond:
            for work in reversed(chunk):
                self._queue.appendleft(work)
                self._in_flight -= work.points
                self._queued += work.points
            self._trim()

    def _note_failure(self, err: InfluxWriteError) -> None:
        with self._cond:
            self._failures += 1
            first, self._failing = not self._failing, True
        if first or not err.retryable:
            log.warning("influx sink: write failed: %s", err)
