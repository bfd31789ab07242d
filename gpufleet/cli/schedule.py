"""The collector's periodic jobs (apply, evaluate, alerting, retention), on APScheduler.

A job runs every ``interval_seconds`` of wall time, never two runs of it at once. A run
that takes longer than the interval is followed at once by the next, so a job that
cannot keep up runs back to back: it is never skipped and never bursts to make up for
lost runs. APScheduler's interval trigger would instead drop a run that comes due while
the previous one is still going (with a warning each time: hundreds in ten minutes of a
1,000-GPU demo), and what that run would have handled waits another interval; so each
run is a one-off (``date`` trigger) that schedules the next when it ends. Overruns are
counted per job (``overruns``) and logged at most once a minute per job, with how long
the run took.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import SchedulerNotRunningError

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
    #: runs scheduled so far (each is a one-off APScheduler job)
    scheduled: int = 0
    _warned_at: float = field(default=-float("inf"), repr=False)


class PeriodicJobs:
    """Named jobs on one APScheduler ``BackgroundScheduler``, between ``start`` and
    ``shutdown``. A job that raises is logged and runs again at its next time."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._jobs: dict[str, Job] = {}
        self._scheduler = BackgroundScheduler(timezone=UTC)
        self._stopping = threading.Event()

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
        return bool(self._scheduler.running) and not self._stopping.is_set()

    def start(self) -> None:
        self._scheduler.start()
        now = self._monotonic()
        for job in self._jobs.values():
            self._schedule(job, now + job.interval_seconds)

    def shutdown(self, wait: bool = True) -> None:
        """Stop every job; with ``wait``, let a run in progress finish first."""
        self._stopping.set()
        if self._scheduler.running:
            self._scheduler.shutdown(wait=wait)

    def _schedule(self, job: Job, due: float) -> None:
        """The job's next run at ``due`` (on the ``monotonic`` clock)."""
        delay = max(0.0, due - self._monotonic())
        job.scheduled += 1
        # a run ending while ``shutdown`` stops the scheduler has nothing left to schedule
        with contextlib.suppress(SchedulerNotRunningError):
            self._scheduler.add_job(
                self._run,
                "date",
                run_date=datetime.now(UTC) + timedelta(seconds=delay),
                args=(job, due),
                # a run of its own: scheduled from the end of the one before, it may come
                # due while APScheduler still counts that one running, which under the
                # same id would be refused ("maximum number of running instances")
                id=f"{job.name}#{job.scheduled}",
                misfire_grace_time=None,  # late is still to run: nothing is ever skipped
            )

    def _run(self, job: Job, due: float) -> None:
        started = self._monotonic()
        try:
            job.func()
        except Exception:  # a failing job must not stop its schedule
            log.exception("scheduled job %s failed", job.name)
        ended = self._monotonic()
        next_at = due + job.interval_seconds
        if ended > next_at:  # late: the next run starts now, the lost ones are gone
            next_at = ended
            if ended - started > job.interval_seconds:  # not just woken up late
                self._overran(job, ended - started, ended)
        if not self._stopping.is_set():
            self._schedule(job, next_at)

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
