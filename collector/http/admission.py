"""Admission control at the edge: a bound on batch bytes in flight, on batches queued for
the ingest thread and on how far the event loop runs behind; past any, ``429`` with
``Retry-After`` before the body is read.

Why: without a bound every concurrent POST holds its body in memory until the ingest thread
has stored it (48 concurrent 15 MiB bodies took the collector from 386 MiB to 6 GiB), and
past what the ingest thread drains, answers only grow later (p99 2.9 s at 4,800 agents)
until agents time out and resend what was already queued. Refusing at the door with 429 is
what Prometheus/Mimir ingestion does: the agent keeps the batch in its spool and retries
after ``Retry-After``, so nothing is lost and the collector stays at its working size.

In flight: from the moment a request's ``Content-Length`` is reserved (or, for a chunked
body, as its chunks arrive) until the ingest thread has stored or refused it. Queued: handed
to the ingest thread (``CollectorBackend.submit``) and not yet answered. ``Retry-After`` is
how long the ingest thread takes, at the rate it drained the last ``RATE_WINDOW_SECONDS``,
to store what is ahead of the sender now, in whole seconds clamped to
``RETRY_AFTER_MIN_SECONDS..RETRY_AFTER_MAX_SECONDS``; the maximum when nothing drained.

The loop's lag: on 2 cores the HTTP work itself (parsing, routing, answering; shared with
the ingest thread's decoding) saturates the event loop before the two bounds fill
(bench/collector_load.py: no batch shed, p99 43 s and a seventh of the knee's throughput
at 10x the knee, agents timing out and resending). A probe scheduled every
``LAG_PROBE_SECONDS`` notes how late it runs; past ``server.max_loop_lag_seconds`` (the
most it was late over ``LAG_WINDOW_SECONDS``) batches are refused, Retry-After twice the
lag, so the requests the loop does take are answered in time.

Everything here runs on the event loop's thread (completions are handed back to it), so it
needs no lock; the exporter reads the two gauges from a worker thread (plain ints).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import TypeVar

from prometheus_client.metrics_core import Metric

from collector.backend import IngestError, RejectReason
from collector.config import ServerSettings
from collector.metrics import catalogue as cat
from collector.metrics.exporter import filled

T = TypeVar("T")

RETRY_AFTER_MIN_SECONDS = 1
RETRY_AFTER_MAX_SECONDS = 30
#: the drain rate behind Retry-After is measured over this much of the recent past
RATE_WINDOW_SECONDS = 10.0
#: the loop-lag probe runs this often, and its lateness counts this long
LAG_PROBE_SECONDS = 0.1
LAG_WINDOW_SECONDS = 2.0


def _retry_after(seconds: float) -> int:
    """``seconds`` as a Retry-After: whole seconds, within the bounds above."""
    return max(RETRY_AFTER_MIN_SECONDS, min(RETRY_AFTER_MAX_SECONDS, math.ceil(seconds)))


class Ticket:
    """The bytes one request holds of the in-flight bound."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0


class Admission:
    """The in-flight bytes and queued batches now, and the rate the ingest thread drains
    them; ``clock`` is monotonic seconds. Also a prometheus_client Collector of its gauges."""

    def __init__(self, settings: ServerSettings, clock: Callable[[], float] = time.monotonic):
        self.max_bytes = settings.max_inflight_bytes
        self.max_batches = settings.max_queued_batches
        self.max_lag = settings.max_loop_lag_seconds
        self._clock = clock
        #: (when, how late) of the loop-lag probe's runs within LAG_WINDOW_SECONDS
        self._lateness: deque[tuple[float, float]] = deque()
        self._probing = False
        self.inflight_bytes = 0
        self.queued_batches = 0
        #: (when, bytes) of each batch the ingest thread finished, within RATE_WINDOW_SECONDS
        self._drained: deque[tuple[float, int]] = deque()

    def admit(self, declared_bytes: int) -> Ticket:
        """A ticket holding ``declared_bytes`` (the Content-Length; 0 when chunked), or
        the 429 refusing the request before its body is read."""
        if not self._probing:  # the first request starts the probe on the serving loop
            self._probing = True
            self._schedule_probe(asyncio.get_running_loop())
        if (lag := self.loop_lag()) > self.max_lag:
            raise self._overloaded(
                f"the event loop runs {lag:.1f} s behind (server.max_loop_lag_seconds "
                f"{self.max_lag:g})",
                _retry_after(2 * lag),
            )
        if self.queued_batches >= self.max_batches:
            raise self._overloaded(
                f"{self.queued_batches} batches are queued for storage, the limit "
                f"(server.max_queued_batches)",
                self._wait_seconds(self.queued_batches, batches=True),
            )
        ticket = Ticket()
        self.grow(ticket, declared_bytes)
        return ticket

    def grow(self, ticket: Ticket, total_bytes: int) -> None:
        """``ticket`` holds ``total_bytes`` now (a chunked body read so far), or the 429
        when that passes the bound (the ticket keeps what it held: release it)."""
        more = total_bytes - ticket.bytes
        if more <= 0:
            return
        others = self.inflight_bytes - ticket.bytes  # a lone request always passes
        if self.inflight_bytes + more > self.max_bytes and others:
            raise self._overloaded(
                f"{others} bytes of batches are in flight; {more} more would pass "
                f"server.max_inflight_bytes ({self.max_bytes})",
                self._wait_seconds(self.inflight_bytes, batches=False),
            )
        ticket.bytes += more
        self.inflight_bytes += more

    def release(self, ticket: Ticket) -> None:
        """Give back what ``ticket`` holds (the request is done, or its body was refused)."""
        self.inflight_bytes -= ticket.bytes
        ticket.bytes = 0

    def queue(self, ticket: Ticket, future: Future[T]) -> None:
        """``ticket``'s batch went to the ingest thread as ``future``: it is queued, and its
        bytes held, until the future is done (whatever becomes of the request)."""
        self.queued_batches += 1
        loop = asyncio.get_running_loop()
        held, ticket.bytes = ticket.bytes, 0

        def done(_: Future[T]) -> None:
            self.queued_batches -= 1
            self.inflight_bytes -= held
            self._drained.append((self._clock(), held))

        future.add_done_callback(lambda f: loop.call_soon_threadsafe(done, f))

    def loop_lag(self) -> float:
        """The most the probe ran late within the last LAG_WINDOW_SECONDS (0.0 before).
        Reads a copy: the exporter calls this from a worker thread."""
        since = self._clock() - LAG_WINDOW_SECONDS
        return max((late for at, late in list(self._lateness) if at >= since), default=0.0)

    def _schedule_probe(self, loop: asyncio.AbstractEventLoop) -> None:
        due = loop.time() + LAG_PROBE_SECONDS
        loop.call_at(due, self._probe, loop, due)

    def _probe(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        late, now, lateness = loop.time() - due, self._clock(), self._lateness
        while lateness and lateness[0][0] < now - LAG_WINDOW_SECONDS:
            lateness.popleft()
        if late > 0.01:  # on time is not worth a slot
            lateness.append((now, late))
        self._schedule_probe(loop)

    def _wait_seconds(self, ahead: int, batches: bool) -> int:
        """Seconds the ingest thread needs, at its recent rate, to drain ``ahead``."""
        now = self._clock()
        drained = self._drained
        while drained and drained[0][0] < now - RATE_WINDOW_SECONDS:
            drained.popleft()
        done = len(drained) if batches else sum(n for _, n in drained)
        if not done:
            return RETRY_AFTER_MAX_SECONDS
        seconds = ahead / (done / RATE_WINDOW_SECONDS)
        return _retry_after(seconds)

    def _overloaded(self, what: str, retry_after_seconds: int) -> IngestError:
        err = IngestError(
            429,
            f"collector overloaded: {what}; batch not read, retry after "
            f"{retry_after_seconds} s (Retry-After), or raise the setting if the collector "
            "has memory and CPU to spare",
            reason=RejectReason.OVERLOADED,
        )
        err.retry_after_seconds = retry_after_seconds
        return err  # logged by the edge, once a minute (http/app.py log_refusal)

    # -- prometheus_client Collector -------------------------------------------------------

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        return [
            filled(cat.INFLIGHT_BYTES, {(): float(self.inflight_bytes)}),
            filled(cat.QUEUED_BATCHES, {(): float(self.queued_batches)}),
            filled(cat.LOOP_LAG, {(): self.loop_lag()}),
        ]
