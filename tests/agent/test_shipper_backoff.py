"""Backoff: grows, has jitter, stays within bounds; the run loop keeps its cadence.

The run loop sleeps only through ``stop.wait``; a stop event that advances a fake clock
instead of sleeping lets an hour of outage run in milliseconds, against a real server.
"""

from __future__ import annotations

import itertools
import random
import statistics
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.model import GpuSample
from agent.shipper import Shipper
from agent.shipping_policy import backoff_delay
from agent.stats import AgentStats
from tests.agent.test_shipper import GPUS, TOKEN, FakeCollector, settings_for

START = 1_700_000_000.0


def test_backoff_stays_between_initial_and_a_doubling_cap() -> None:
    rng = random.Random(1)
    for failures in range(1, 12):
        cap = min(60.0, 1.0 * 2**failures)
        delays = [backoff_delay(failures, 1.0, 60.0, rng) for _ in range(200)]
        assert min(delays) >= 1.0
        assert max(delays) <= cap


def test_backoff_grows_with_failures_until_the_maximum() -> None:
    rng = random.Random(2)
    means = [
        statistics.mean(backoff_delay(n, 1.0, 60.0, rng) for _ in range(2000)) for n in range(1, 9)
    ]
    # uniform(1, 2**n) until 2**n passes 60, then uniform(1, 60)
    expected = [1.5, 2.5, 4.5, 8.5, 16.5, 30.5, 30.5, 30.5]
    for mean, want in zip(means, expected, strict=True):
        assert mean == pytest.approx(want, rel=0.06)


def test_backoff_has_jitter() -> None:
    rng = random.Random(3)
    delays = {round(backoff_delay(5, 1.0, 60.0, rng), 6) for _ in range(50)}
    assert len(delays) > 40


class FakeTime:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


class SteppingStop(threading.Event):
    """``wait(t)`` advances fake time by ``t`` at once and calls ``on_wait``; stops at ``until``."""

    def __init__(self, clock: FakeTime, until: float, on_wait: Callable[[float], None]) -> None:
        super().__init__()
        self.clock = clock
        self.until = until
        self.on_wait = on_wait

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None and timeout > 0
        self.clock.now += timeout
        self.on_wait(self.clock.now)
        return self.clock.now >= self.until


def test_run_backs_off_while_refused_then_delivers_everything_on_its_cadence(
    collector: FakeCollector, tmp_path: Path
) -> None:
    clock = FakeTime()
    collector.clock = clock
    collector.answer = 503
    settings = settings_for(
        collector,
        tmp_path,
        batch_interval_seconds=5.0,
        initial_backoff_seconds=1.0,
        max_backoff_seconds=60.0,
    )
    shipper = Shipper(settings, "n", AgentStats(), TOKEN, clock=clock, rng=random.Random(7))
    submitted: list[float] = []

    def tick(now: float) -> None:
        # a sampler ticking whenever the loop wakes; the collector recovers at +600 s
        shipper.submit(GPUS, [GpuSample(timestamp=now, gpu_uuid="GPU-a")])
        submitted.append(now)
        if now >= START + 600:
            collector.answer = None

    shipper.run(SteppingStop(clock, START + 660, tick))

    refused = [t - START for t in collector.attempt_times if t < START + 600]
    gaps = [b - a for a, b in itertools.pairwise(refused)]
    for failures, gap in enumerate(gaps, start=1):
        assert gap >= 1.0 - 1e-6
        assert gap <= min(60.0, 2.0**failures) + 1e-6
    assert max(gaps) > 30  # it grew towards the maximum ...
    assert len({round(g, 3) for g in gaps}) == len(gaps)  # ... with jitter
    assert collector.samples() == submitted[: len(collector.samples())]
    assert len(collector.samples()) >= len(submitted) - 2  # the last tick may be buffered
    for batch in collector.accepted:  # spooled every interval, backoff or not
        assert all(batch.sent_at - s.timestamp <= 5.0 + 1e-6 for s in batch.samples)
    recovered = sorted({t - START for t in collector.attempt_times if t >= START + 630})
    assert [b - a for a, b in itertools.pairwise(recovered)] == pytest.approx(
        [5.0] * (len(recovered) - 1)
    )
    shipper.close()
