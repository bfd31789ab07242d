"""What the shipper does when the collector refuses: keep on 401 and on what someone can fix,
drop and count only what the collector refuses for good."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from agent.shipper import Shipper
from agent.shipping_policy import ShipOutcome, judge
from agent.stats import AgentStats
from gpufleet.settings import ConfigError
from tests.agent.test_shipper import (
    GPUS,
    TOKEN,
    FakeCollector,
    refusal,
    settings_for,
    ticks,
    timestamps,
)

PROXY_PAGE = b"<html><body><h1>400 Bad Request</h1>nginx</body></html>"


@pytest.mark.parametrize(
    ("status", "body", "samples", "outcome"),
    [
        (401, refusal("bad token", "unauthorized"), 5, ShipOutcome.HELD),
        (403, b"Forbidden", 5, ShipOutcome.HELD),
        (422, refusal("not JSON", "malformed"), 5, ShipOutcome.REJECTED),
        (422, refusal("NaN", "invalid_value"), 5, ShipOutcome.REJECTED),
        (422, refusal("GPU-x not in gpus", "unknown_gpu"), 5, ShipOutcome.REJECTED),
        (413, refusal("too big", "too_large"), 5, ShipOutcome.SPLIT),
        (413, refusal("too big", "too_large"), 1, ShipOutcome.REJECTED),
        (413, PROXY_PAGE, 5, ShipOutcome.SPLIT),
        (413, PROXY_PAGE, 1, ShipOutcome.HELD),
        (422, refusal("ahead", "future_timestamp"), 5, ShipOutcome.HELD),
        (422, refusal("old", "past_timestamp"), 5, ShipOutcome.HELD),
        (422, refusal("speaks 2", "schema_version"), 5, ShipOutcome.HELD),
        (409, refusal("claimed", "duplicate_gpu"), 5, ShipOutcome.HELD),
        (422, refusal("too many GPUs", "limit_exceeded"), 5, ShipOutcome.HELD),
        (422, refusal("new rule", "a_reason_from_the_future"), 5, ShipOutcome.HELD),
        (400, PROXY_PAGE, 5, ShipOutcome.HELD),
        (422, b'{"detail": "a proxy speaking JSON"}', 5, ShipOutcome.HELD),
        (404, b"Not Found", 5, ShipOutcome.HELD),
        (429, refusal("busy", "overloaded"), 5, ShipOutcome.RETRY),
        (500, b"oops", 5, ShipOutcome.RETRY),
        (503, refusal("could not store", None), 5, ShipOutcome.RETRY),
        (302, b"", 5, ShipOutcome.RETRY),
    ],
)
def test_answers_are_judged_by_status_and_the_collectors_reason(
    status: int, body: bytes, samples: int, outcome: ShipOutcome
) -> None:
    response = httpx.Response(status, content=body)
    assert judge(response, "boot", 7, samples, 0.0).outcome is outcome


def test_a_refused_token_keeps_the_data_and_a_rotated_token_file_recovers(
    collector: FakeCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore too: the token must not leak there
    token_file = tmp_path / "token"
    token_file.write_text("wrong-token-value\n")
    settings = settings_for(collector, tmp_path / "spool", token_file=token_file)
    stats = AgentStats()
    shipper = Shipper(settings, "node-1", stats)
    sent = ticks(0, 3)
    for tick in sent:
        shipper.submit(GPUS, tick)
        assert shipper.flush() == 0

    assert collector.headers[0]["authorization"] == "Bearer wrong-token-value"
    assert collector.accepted == []
    assert stats.snapshot().spool_batches == 3
    auth_errors = [r for r in caplog.records if "refused the token" in r.getMessage()]
    assert len(auth_errors) == 1 and auth_errors[0].levelno == logging.ERROR

    token_file.write_text(TOKEN + "\n")  # the mounted secret is rotated
    shipper.flush()  # one more 401 makes the shipper re-read the file
    assert shipper.flush() == 3
    assert collector.samples() == timestamps(sent)
    shipper.close()
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert "wrong-token-value" not in logged
    assert TOKEN not in logged


def test_a_missing_or_empty_token_file_is_a_config_error(tmp_path: Path) -> None:
    collector = FakeCollector()  # not started: only its URL is used
    with pytest.raises(ConfigError, match=r"shipper\.token_file"):
        Shipper(settings_for(collector, tmp_path, token_file=tmp_path / "nope"), "n", AgentStats())
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        Shipper(settings_for(collector, tmp_path, token_file=tmp_path / "empty"), "n", AgentStats())


def test_a_malformed_batch_is_dropped_counted_and_does_not_block_the_queue(
    collector: FakeCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collector.reject_seqs = {2}
    stats = AgentStats()
    shipper = Shipper(settings_for(collector, tmp_path, max_samples_per_batch=4), "n", stats, TOKEN)
    sent = ticks(0, 6)  # 12 samples -> batches of 4, 4, 4
    for tick in sent:
        shipper.submit(GPUS, tick)

    assert shipper.flush() == 2

    expected = timestamps(sent)
    assert collector.samples() == expected[:4] + expected[8:]
    snap = stats.snapshot()
    assert (snap.spool_dropped_batches_total, snap.spool_dropped_samples_total) == (1, 4)
    assert snap.samples_sent_total == 8
    assert list(tmp_path.iterdir()) == []
    assert "samples[0].power_watts: expected a number" in caplog.text
    shipper.close()


@pytest.mark.parametrize(
    ("status", "reason"), [(400, "malformed"), (422, "unknown_gpu"), (413, "too_large")]
)
def test_a_batch_the_collector_refuses_for_good_is_dropped_and_logged(
    collector: FakeCollector,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    status: int,
    reason: str,
) -> None:
    collector.answer, collector.reason = status, reason
    stats = AgentStats()
    shipper = Shipper(settings_for(collector, tmp_path), "node-7", stats, TOKEN)
    shipper.submit(GPUS, ticks(0, 1)[0][:1])  # one sample: a 413 cannot be split
    assert shipper.flush() == 0
    collector.answer = None
    shipper.submit(GPUS, ticks(1, 1)[0])

    assert shipper.flush() == 1

    assert collector.samples() == timestamps(ticks(1, 1))
    snap = stats.snapshot()
    assert snap.spool_dropped_samples_total == 1
    assert snap.batches_refused_total == {reason: 1}
    [lost] = [r for r in caplog.records if "is lost" in r.getMessage()]
    assert lost.levelno == logging.ERROR
    assert f"batch {shipper.boot_id}/1 of node node-7 (1 samples)" in lost.getMessage()
    assert "collector unavailable" in lost.getMessage()  # the collector's message
    shipper.close()


def test_a_2xx_without_a_valid_ack_keeps_the_batch(
    collector: FakeCollector, tmp_path: Path
) -> None:
    collector.answer = 200  # a proxy answering 200 with a body that is not an ack
    shipper = Shipper(settings_for(collector, tmp_path), "n", AgentStats(), TOKEN)
    shipper.submit(GPUS, ticks(0, 1)[0])
    assert shipper.flush() == 0
    assert len(list(tmp_path.iterdir())) == 1
    collector.answer = None
    assert shipper.flush() == 1
    assert collector.samples() == timestamps(ticks(0, 1))
    shipper.close()


def test_a_full_spool_during_an_outage_drops_the_oldest_and_counts_exactly_the_lost(
    collector: FakeCollector, tmp_path: Path
) -> None:
    stats = AgentStats()
    # Room for about three one-tick batches (each a few hundred bytes gzipped).
    probe = Shipper(settings_for(collector, tmp_path / "probe"), "n", AgentStats(), TOKEN)
    collector.stop()
    probe.submit(GPUS, ticks(0, 1)[0])
    probe.close()
    [probe_file] = (tmp_path / "probe").iterdir()
    one_batch_bytes = probe_file.stat().st_size
    settings = settings_for(collector, tmp_path / "spool", spool_max_bytes=3 * one_batch_bytes + 20)
    shipper = Shipper(settings, "n", stats, TOKEN)
    sent = ticks(100, 8)
    for tick in sent:
        shipper.submit(GPUS, tick)
        shipper.flush()

    collector.start()
    shipper.flush()

    received = collector.samples()
    snap = stats.snapshot()
    assert 0 < len(received) < len(timestamps(sent))
    assert received == timestamps(sent)[-len(received) :]  # the newest survive, in order
    assert snap.spool_dropped_samples_total == len(timestamps(sent)) - len(received)
    shipper.close()


def test_a_spool_that_cannot_be_written_still_sends_directly(
    collector: FakeCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool_dir = tmp_path / "spool"
    stats = AgentStats()
    shipper = Shipper(settings_for(collector, spool_dir), "n", stats, TOKEN)
    spool_dir.rmdir()
    spool_dir.write_text("not a directory any more")  # every write into it now fails
    shipper.submit(GPUS, ticks(0, 1)[0])

    assert shipper.flush() == 1

    assert collector.samples() == timestamps(ticks(0, 1))
    assert "held in memory meanwhile" in caplog.text
    collector.stop()
    shipper.submit(GPUS, ticks(1, 1)[0])
    assert shipper.flush() == 0
    assert shipper.flush() == 0  # retried on every pass, not one try
    collector.start()
    assert shipper.flush() == 1
    assert collector.samples() == timestamps(ticks(0, 2))
    assert stats.snapshot().spool_dropped_samples_total == 0
    shipper.close()
