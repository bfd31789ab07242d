"""How the collector benchmark drives the collector's core: one batch after another from one
thread, or each second's batches in flight at once as the app's event loop has them, with
the scheduler's tick beside them; CPU charged per stage. Every batch goes in through
``submit``, as POSTed bodies do.

``Timed.charge`` charges the CPU of the calling thread (``thread_time``), so the stages add
up across threads; ``Timed.cpu_seconds`` is the CPU of the whole process over the run.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collector.config import IngestSettings
    from collector.service import CollectorCore

T = TypeVar("T")


@dataclass
class Timed:
    """CPU seconds per stage (of the thread that ran it), of the whole process, and what
    went through."""

    stages: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    applied: int = 0
    batches: int = 0
    #: process CPU (all threads) from the first batch to the final evaluation
    cpu_seconds: float = 0.0
    #: ledger transactions that acknowledged batches (one fsync each)
    ack_groups: int = 0
    #: memory growth once the last batch is in (``at_last_arrival``)
    rss_growth_bytes: int = 0
    traced_bytes: int | None = None
    #: called once the last batch is in, before that second's tick: the most samples
    #: are buffered then (the memory measurements)
    at_last_arrival: Callable[[], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def charge(self, stage: str, work: Callable[[], T]) -> T:
        started = time.thread_time()
        result = work()
        spent = time.thread_time() - started
        with self._lock:
            self.stages[stage] = self.stages.get(stage, 0.0) + spent
        return result

    def count_applied(self, samples: int) -> None:
        with self._lock:
            self.applied += samples

    @property
    def staged_seconds(self) -> float:
        return sum(self.stages.values())


class SimClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


Arrivals = list[list[tuple[bytes, int]]]


@dataclass(frozen=True)
class Lockstep:
    """How a feed keeps pace with replicas fed beside it in other processes
    (bench/collector_replicas.py): ``wait`` after each simulated second (a barrier across
    the replicas, so every batch of a second is in the shared intake before any replica
    goes on), and ``leads``: whether the recommendations are evaluated here (the leader)."""

    wait: Callable[[], None] = lambda: None
    leads: Callable[[], bool] = lambda: True


#: one collector alone
SOLO = Lockstep()


def feed_one_caller(
    core: CollectorCore, ingest: IngestSettings, timed: Timed, arrivals: Arrivals, clock: SimClock
) -> None:
    """One thread: each second's batches one after another; every
    ``ingest.apply_interval_seconds`` the scheduler's tick (see ``with_drain``)."""
    start = clock.now
    for second, batches in enumerate(with_drain(arrivals, ingest)):
        now = clock.now = start + second + 1.0
        for body, samples in batches:
            feed(core, timed, body, now)
            timed.samples += samples
            timed.batches += 1
        if second + 1 == len(arrivals) and timed.at_last_arrival is not None:
            timed.at_last_arrival()
        if _apply_due(second, ingest):
            scheduled(core, timed, now)


def with_drain(arrivals: Arrivals, ingest: IngestSettings) -> Arrivals:
    """``arrivals`` and then seconds with no batches until the reorder window and one
    apply interval have passed on the collector's clock: the last samples are applied by
    regular ticks, as in a running collector, not all at once by a final flush."""
    drain = math.ceil(ingest.reorder_window_seconds + ingest.apply_interval_seconds)
    return [*arrivals, *([] for _ in range(drain))]


def _apply_due(second: int, ingest: IngestSettings) -> bool:
    """Whether the apply job runs at the end of ``second`` (0-based, simulated seconds)."""
    return (second + 1) % max(1, round(ingest.apply_interval_seconds)) == 0


def feed_concurrent(
    core: CollectorCore,
    ingest: IngestSettings,
    timed: Timed,
    arrivals: Arrivals,
    clock: SimClock,
    step: Lockstep = SOLO,
) -> None:
    """Every batch of a second in flight at once, as the app's event loop has them from many
    agents: one thread hands each body to ``submit`` without waiting; the core's ingest
    thread decodes, validates, stores and buffers them in groups (its CPU
    is charged to ``ingest`` afterwards: ``ingest_thread_seconds``); the second is over
    once every batch is acknowledged. Every ``ingest.apply_interval_seconds`` a tick runs
    on the scheduler's thread while the next seconds' batches arrive (one tick at a time,
    as APScheduler runs the apply job). ``step``: see ``Lockstep``."""
    start = clock.now
    with ThreadPoolExecutor(1, thread_name_prefix="scheduler") as scheduler:
        ticking: Future[None] | None = None
        for second, batches in enumerate(with_drain(arrivals, ingest)):
            now = clock.now = start + second + 1.0
            acks = []
            for body, samples in batches:
                acks.append(timed.charge("ingest", partial(core.service.submit, body, "gzip", now)))
                timed.samples += samples
                timed.batches += 1
            for ack in acks:
                ack.result()
            step.wait()
            if second + 1 == len(arrivals) and timed.at_last_arrival is not None:
                if ticking is not None:
                    ticking.result()
                timed.at_last_arrival()
            if not _apply_due(second, ingest):
                continue
            if ticking is not None:
                ticking.result()
            ticking = scheduler.submit(scheduled, core, timed, now, step.leads)
        if ticking is not None:
            ticking.result()


def ingest_thread_seconds() -> float:
    """CPU seconds of the ingest thread so far (0 if it never started)."""
    from collector.ingest.queue import INGEST_THREAD_NAME

    for thread in threading.enumerate():
        if thread.name == INGEST_THREAD_NAME and thread.ident is not None:
            return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return 0.0


def scheduled(
    core: CollectorCore, timed: Timed, now: float, leads: Callable[[], bool] = SOLO.leads
) -> None:
    """What the scheduler's jobs do every apply interval: apply what is ready, evaluate
    when due (on the leader only, as ``Collector.evaluate`` does)."""
    timed.count_applied(timed.charge("tick", core.applier.tick))
    if leads():
        timed.charge("evaluate", partial(core.recommender.evaluate_if_due, now))


def feed(core: CollectorCore, timed: Timed, body: bytes, now: float) -> None:
    """What POST /v1/batches does with one gzipped body (collector/http/app.py): submitted,
    and awaited until it is durable. The ingest thread's CPU (decode, validate, store,
    buffer) is charged to ``ingest`` afterwards (``ingest_thread_seconds``)."""
    ack = timed.charge("ingest", partial(core.service.submit, body, "gzip", now)).result()
    if ack.status != "accepted":
        raise RuntimeError(f"the synthetic batch was not accepted: {ack.status}")
