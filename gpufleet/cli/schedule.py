"""The collector's periodic jobs (apply, evaluate, alerting, retention): one thread each.

A job runs every ``interval_seconds`` of wall time, never two runs of it at once. A run
that takes longer than the interval is followed at once by the next, so a job that
cannot keep up runs back to back: it is never skipped (APScheduler's interval trigger
dropped such a run with a warning, 261 of them in ten minutes of a 1,000-GPU demo, and
the samples or changes it would have handled waited another interval) and never bursts
to make up for lost runs. Overruns are counted per job (``overruns``) and logged at most
once a minute per job, with how long the run took.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("gpufleet.collector")

#: wall seconds between two overrun warnings of one job
WARN_EVERY_SECONDS = 60.0


@dataclass
class Job:
    name: str
    func: Callable[[], object]
    interval_seconds: float
    #: runs that took longer than the interval (the next one started late, at once)
    overruns: int = 0
    _warned_at: float = field(default=-float("inf"), repr=False)


class PeriodicJobs:
    """Named jobs, each on its own daemon thread between ``start`` and ``shutdown``.
    A job that raises is logged and runs again at its next time."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._jobs: dict[str, Job] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def add(self, name: str, func: Callable[[], object], interval_seconds: float) -> None:
        if interval_seconds <= 0:
            raise ValueError(f"job {name}: interval_seconds must be > 0, got {interval_seconds}")
        if name in self._jobs:
            raise ValueError(f"job {name}: already scheduled")
        self._jobs[name] = Job(name, func, interval_seconds)

    def intervals(self) -> dict[str, float]:
        """Each job's interval in seconds, by name."""
        return {job.name: job.interval_seconds for job in self._jobs.values()}

    def overruns(self) -> dict[str, int]:
        return {job.name: job.overruns for job in self._jobs.values()}

    @property
    def running(self) -> bool:
        return bool(self._threads) and not self._stop.is_set()

    def start(self) -> None:
        for job in self._jobs.values():
            thread = threading.Thread(target=self._loop, args=(job,), name=f"job-{job.name}")
            thread.daemon = True
            thread.start()
            self._threads.append(thread)

    def shutdown(self, wait: bool = True) -> None:
        """Stop every job; with ``wait``, let a run in progress finish first."""
        self._stop.set()
        if wait:
            for thread in self._threads:
                thread.join()

    def _loop(self, job: Job) -> None:
        next_at = self._monotonic() + job.interval_seconds
        while not self._stop.wait(max(0.0, next_at - self._monotonic())):
            started = self._monotonic()
            try:
                job.func()
            except Exception:  # a failing job must not stop its schedule
                log.exception("scheduled job %s failed", job.name)
            ended = self._monotonic()
            next_at += job.interval_seconds
            if ended > next_at:  # late: the next run starts now, the lost ones are gone
                next_at = ended
                if ended - started > job.interval_seconds:  # not just woken up late
                    self._overran(job, ended - started, ended)

    def _overran(self, job: Job, took_seconds: float, now: float) -> None:
        job.overruns += 1
        if now - job._warned_at >= WARN_EVERY_SECONDS:
            job._warned_at = now
            log.warning(
                "job %s took %.0f ms, longer than its %.0f ms interval: it runs back to back "
                "until it keeps up (%d overruns so far); what it feeds lags meanwhile",
                job.name,
                took_seconds * 1e3,
                job.interval_seconds * 1e3,
                job.overruns,
            )
