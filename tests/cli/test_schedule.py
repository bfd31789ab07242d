"""PeriodicJobs: a job runs every interval, one run at a time; a slow run is followed at
once by the next (counted as an overrun), and a failing run does not end the schedule."""

from __future__ import annotations

import threading
import time

import pytest

from gpufleet.cli.schedule import PeriodicJobs


def test_a_slow_job_runs_back_to_back_one_at_a_time_and_counts_its_overruns() -> None:
    starts: list[float] = []
    running = threading.Lock()
    overlapped = []

    def slow() -> None:
        if not running.acquire(blocking=False):
            overlapped.append(time.monotonic())
            return
        starts.append(time.monotonic())
        time.sleep(0.15)
        running.release()

    jobs = PeriodicJobs()
    jobs.add("slow", slow, 0.05)
    jobs.start()
    time.sleep(1.0)
    jobs.shutdown(wait=True)
    assert overlapped == []
    assert len(starts) >= 4  # ~6 back to back in 1 s; none waited for a lost interval
    assert jobs.overruns()["slow"] >= len(starts) - 1


def test_a_failing_job_runs_again_and_shutdown_stops_it() -> None:
    calls = []

    def failing() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    jobs = PeriodicJobs()
    jobs.add("failing", failing, 0.02)
    jobs.start()
    time.sleep(0.3)
    jobs.shutdown(wait=True)
    assert not jobs.running
    seen = len(calls)
    time.sleep(0.1)
    assert seen >= 3 and len(calls) == seen


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_an_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(ValueError, match="interval_seconds must be > 0"):
        PeriodicJobs().add("x", lambda: None, interval)
