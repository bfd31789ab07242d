"""The shipper drops only what the collector refuses for good: it honours 429/Retry-After,
splits on 413, holds what someone can fix (saying why), sees through proxies, and heeds
the warnings of acks. The real Shipper against the FakeCollector on loopback; ground truth
is what the test submitted."""

from __future__ import annotations

import itertools
import logging
import random
import re
import shutil
import time
from email.utils import formatdate
from pathlib import Path

import httpx
import pytest

from agent.model import GpuSample
from agent.shipper import Shipper
from agent.shipping_policy import ShipOutcome, judge, retry_delay
from agent.stats import AgentStats
from tests.agent.test_shipper import (
    GPUS,
    TOKEN,
    FakeCollector,
    refusal,
    settings_for,
    ticks,
    timestamps,
)
from tests.agent.test_shipper_backoff import START, FakeTime, SteppingStop


def shipper_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.getMessage().startswith("shipper:")
    ]


@pytest.mark.parametrize(("asked", "waited"), [("2", 2.0), ("3600", 300.0)])
def test_a_429_is_retried_no_earlier_than_retry_after_with_jitter(
    collector: FakeCollector, tmp_path: Path, asked: str, waited: float
) -> None:
    clock = FakeTime()
    collector.clock = clock
    collector.answer, collector.reason = 429, "overloaded"
    collector.answer_headers = {"Retry-After": asked}
    settings = settings_for(
        collector,
        tmp_path,
        batch_interval_seconds=waited / 4,  # spooling goes on while the sends wait
        initial_backoff_seconds=0.1,
        max_backoff_seconds=0.5,
    )
    stats = AgentStats()
    shipper = Shipper(settings, "n", stats, TOKEN, clock=clock, rng=random.Random(5))
    submitted: list[float] = []
    shown: list[float] = []

    def tick(now: float) -> None:
        shipper.submit(GPUS, [GpuSample(timestamp=now, gpu_uuid="GPU-a")])
        submitted.append(now)
        if len(collector.attempt_times) == 4 and collector.answer is not None:
            shown.append(stats.snapshot().retry_after_seconds)
            collector.answer = None  # the collector has room again

    shipper.run(SteppingStop(clock, START + 5 * waited * 1.25, tick))

    refused = collector.attempt_times[:4]
    gaps = [b - a for a, b in itertools.pairwise(refused)]
    assert all(waited - 1e-6 <= gap <= waited * 1.25 + 1e-6 for gap in gaps), gaps
    assert len({round(gap, 6) for gap in gaps}) == len(gaps)  # jitter: no lockstep
    assert shown == [waited]
    assert stats.snapshot().retry_after_seconds == 0.0  # delivered since
    assert collector.samples() == submitted[: len(collector.samples())]
    assert len(collector.samples()) >= len(submitted) - 1
    shipper.close()


def test_a_413_splits_the_batch_until_it_fits_and_later_batches_are_cut_smaller(
    collector: FakeCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collector.max_samples = 3
    stats = AgentStats()
    settings = settings_for(collector, tmp_path, max_samples_per_batch=100)
    shipper = Shipper(settings, "n", stats, TOKEN)
    sent = ticks(0, 5)  # 10 samples: 10 -> 5 + 5 -> (2 + 3) + (2 + 3)
    for tick in sent:
        shipper.submit(GPUS, tick)

    assert shipper.flush() == 4

    assert collector.samples() == timestamps(sent)  # every sample once, in order
    assert [len(b.samples) for b in collector.accepted] == [2, 3, 2, 3]
    assert len({(b.agent_boot_id, b.seq) for b in collector.accepted}) == 4
    assert list(tmp_path.iterdir()) == []
    assert stats.snapshot().batches_split_total == 3
    assert stats.snapshot().spool_dropped_samples_total == 0
    attempts = len(collector.attempt_times)
    later = ticks(5, 3)  # 6 samples, cut at the 2 that got through: no 413 this time
    for tick in later:
        shipper.submit(GPUS, tick)
    assert shipper.flush() == 3
    assert len(collector.attempt_times) == attempts + 3
    assert collector.samples() == timestamps(sent + later)
    assert "cut at 2 samples from now on" in caplog.text
    shipper.close()


def test_a_split_cut_short_by_a_crash_counts_no_sample_twice(
    collector: FakeCollector, tmp_path: Path
) -> None:
    spool_dir, before, during = tmp_path / "spool", tmp_path / "before", tmp_path / "during"
    collector.stop()
    first = Shipper(settings_for(collector, spool_dir), "n", AgentStats(), TOKEN)
    sent = ticks(0, 2)  # one batch of 4 samples
    for tick in sent:
        first.submit(GPUS, tick)
    assert first.flush() == 0
    shutil.copytree(spool_dir, before)  # the original batch, before the split
    collector.start()
    collector.max_samples = 2

    def snapshot_once(_: object) -> None:
        if not during.exists():  # the halves are on disk, the original is gone
            shutil.copytree(spool_dir, during)

    collector.on_accept = snapshot_once
    assert first.flush() == 2
    # A crash after the first half was acknowledged, with the original's removal undone.
    shutil.rmtree(spool_dir)
    shutil.copytree(during, spool_dir)
    for path in before.iterdir():
        shutil.copy(path, spool_dir)
    collector.max_samples = None  # the limit was raised meanwhile: the original would fit

    second = Shipper(settings_for(collector, spool_dir), "n", AgentStats(), TOKEN)
    second.flush()

    assert collector.samples() == timestamps(sent)
    assert collector.duplicates == 2
    assert list(spool_dir.iterdir()) == []
    second.close()


@pytest.mark.parametrize(
    ("reason", "advice"),
    [
        ("future_timestamp", r"the node's clock is 61[123] s ahead of the collector's: check "),
        ("past_timestamp", r"ingest\.past_tolerance_seconds.*check chrony/NTP"),
        ("schema_version", r"upgrade the collector or pin the agent"),
        ("duplicate_gpu", r"another node still reports one of this node's GPU uuids"),
        ("limit_exceeded", r"raise it in the collector's settings"),
        ("a_reason_from_the_future", r"does not know \('a_reason_from_the_future'\)"),
    ],
)
def test_a_refusal_someone_can_fix_keeps_every_batch_and_says_why_once(
    collector: FakeCollector,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    reason: str,
    advice: str,
) -> None:
    collector.answer, collector.reason = 422, reason
    stats = AgentStats()
    ahead = Shipper(  # the node's clock is 612 s ahead of the collector's Date header
        settings_for(collector, tmp_path), "n", stats, TOKEN, clock=lambda: time.time() + 612
    )
    sent = ticks(0, 3)
    for tick in sent:
        ahead.submit(GPUS, tick)
        assert ahead.flush() == 0

    [error] = shipper_errors(caplog)
    assert re.search(advice, error), error
    assert error.startswith("shipper: HTTP 422: ")
    snap = stats.snapshot()
    assert (snap.spool_batches, snap.spool_dropped_samples_total) == (3, 0)
    label = "other" if reason.startswith("a_reason") else reason
    assert snap.batches_held_total == {label: 3}
    collector.answer = None  # the clock (or version, or limit) is fixed
    assert ahead.flush() == 3
    assert collector.samples() == timestamps(sent)
    ahead.close()


PROXY_PAGE = b"<html><body><h1>Bad Request</h1><hr>nginx</body></html>"


@pytest.mark.parametrize(
    ("status", "path", "samples"),
    [(400, "", 2), (413, "", 1), (422, "", 2), (404, "/wrong/prefix", 2)],
)
def test_a_4xx_that_is_not_the_collectors_keeps_the_batch(
    collector: FakeCollector,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    status: int,
    path: str,
    samples: int,
) -> None:
    if not path:
        collector.answer, collector.answer_body = status, PROXY_PAGE
    settings = settings_for(collector, tmp_path, url=collector.url + path)
    stats = AgentStats()
    shipper = Shipper(settings, "n", stats, TOKEN)
    sent = [tick[:samples] for tick in ticks(0, 3)]
    for tick in sent:
        shipper.submit(GPUS, tick)
        assert shipper.flush() == 0

    [error] = shipper_errors(caplog)
    assert error.startswith(f"shipper: HTTP {status}: the answer did not come from a gpufleet")
    assert "check shipper.url and any proxy in between" in error
    snap = stats.snapshot()
    assert (snap.spool_batches, snap.spool_dropped_samples_total) == (3, 0)
    assert snap.batches_held_total == {"not_collector": 3}
    collector.answer = None  # the proxy (or the URL) is fixed
    fixed = Shipper(settings_for(collector, tmp_path), "n", stats, TOKEN)
    assert fixed.flush() == 3
    assert collector.samples() == timestamps(sent)
    shipper.close()
    fixed.close()


def test_ack_warnings_and_late_samples_are_logged_once_per_streak_and_counted(
    collector: FakeCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stats = AgentStats()
    shipper = Shipper(settings_for(collector, tmp_path), "n", stats, TOKEN)
    warning = "2 samples fall behind event time already applied: check the node's clock"

    def ship(start: int, late: int, warnings: tuple[str, ...]) -> None:
        collector.ack_samples_late, collector.ack_warnings = late, warnings
        for tick in ticks(start, 3):
            shipper.submit(GPUS, tick)
            assert shipper.flush() == 1

    ship(0, 2, (warning,))
    ship(3, 0, ())
    ship(6, 1, (warning,))

    logged = [r for r in caplog.records if "accepted batch" in r.getMessage()]
    assert [r.levelno for r in logged] == [logging.WARNING, logging.WARNING]
    assert all(warning in r.getMessage() for r in logged)
    assert stats.snapshot().samples_late_total == 3 * 2 + 3 * 1
    shipper.close()


def test_batches_held_in_memory_are_bounded_and_each_loss_is_logged(
    collector: FakeCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    probe_dir, spool_dir = tmp_path / "probe", tmp_path / "spool"
    probe = Shipper(settings_for(collector, probe_dir), "n", AgentStats(), TOKEN)
    collector.stop()
    probe.submit(GPUS, ticks(0, 1)[0])
    probe.close()
    [probe_file] = probe_dir.iterdir()
    room = 3 * probe_file.stat().st_size + 20  # three one-tick batches
    settings = settings_for(collector, spool_dir, spool_max_bytes=room)
    stats = AgentStats()
    shipper = Shipper(settings, "n", stats, TOKEN)
    spool_dir.rmdir()
    spool_dir.write_text("not a directory any more")  # every write into it now fails
    sent = ticks(0, 5)
    for tick in sent:
        shipper.submit(GPUS, tick)
        assert shipper.flush() == 0

    collector.start()
    assert shipper.flush() == 3

    assert collector.samples() == timestamps(sent[2:])  # the newest, in order
    lost = [r.getMessage() for r in caplog.records if "is lost" in r.getMessage()]
    assert len(lost) == 2 and all("memory is full" in m for m in lost)
    assert stats.snapshot().spool_dropped_samples_total == 4
    assert stats.snapshot().memory_batches == 0
    shipper.close()


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_as_an_http_date_is_read_against_the_collectors_date(status: int) -> None:
    collector_now = 1_700_000_000.0
    headers = {
        "Date": formatdate(collector_now, usegmt=True),
        "Retry-After": formatdate(collector_now + 30, usegmt=True),
    }
    response = httpx.Response(status, headers=headers, content=refusal("busy", "overloaded"))
    agent_now = collector_now + 600  # the node's clock is 10 min ahead

    verdict = judge(response, "boot", 1, 5, agent_now)

    assert verdict.outcome is ShipOutcome.RETRY
    assert verdict.retry_after_seconds == 30.0
    assert verdict.clock_ahead_seconds == pytest.approx(600, abs=1)
    assert 30.0 <= retry_delay(30.0, 0.1, random.Random(1)) <= 30.0 * 1.25
