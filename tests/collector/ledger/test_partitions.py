"""PostgreSQL only: the rollup tables' time partitions (collector/ledger/partitions.py), read
from PostgreSQL's catalogue: a commit creates the day (and month) partitions its hours need
and the next one ahead, a rolled-back commit leaves none behind that the ledger counts on,
and retention drops whole partitions past its cutoff."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from collector.ledger.partitions import Partitions, span_of
from collector.ledger.store import Ledger, LedgerError, LedgerWrite
from collector.records import DAY_SECONDS, HOUR_SECONDS, Usage
from tests.collector.ledger.test_store import POD, registered
from tests.postgres import PostgresServer

DAY0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    return postgres.new_database()


@pytest.fixture
def ledger(url: str) -> Iterator[Ledger]:
    with Ledger.open(url) as opened:
        registered(opened)
        yield opened


def partitions(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        ).fetchall()
    return {r[0] for r in rows}


def usage_at(*hours: float) -> LedgerWrite:
    write = LedgerWrite()
    for hour in hours:
        write.gpu_usage[(hour, "G1")] = Usage(energy_joules=1.0)
        write.workload_usage[(hour, POD.key)] = Usage(energy_joules=1.0)
    return write


def test_spans_are_utc_days_and_months() -> None:
    assert span_of("gpu_usage_hourly", DAY0 + 5 * HOUR_SECONDS) == (
        DAY0, DAY0 + DAY_SECONDS, "gpu_usage_hourly_p20260101")  # fmt: skip
    start, end, name = span_of("workload_usage_daily", DAY0 + 40 * DAY_SECONDS)  # in February
    assert (start, end - start, name) == (DAY0 + 31 * DAY_SECONDS, 28 * DAY_SECONDS,
                                          "workload_usage_daily_p202602")  # fmt: skip


def test_a_commit_creates_its_days_and_the_next_and_prune_drops_past_ones(
    ledger: Ledger, url: str
) -> None:
    ledger.commit(usage_at(DAY0 + HOUR_SECONDS, DAY0 + 3 * DAY_SECONDS))
    made = partitions(url)
    for day in ("20260101", "20260102", "20260104", "20260105"):
        assert f"gpu_usage_hourly_p{day}" in made and f"workload_usage_hourly_p{day}" in made
    assert "gpu_usage_hourly_p20260103" not in made  # no hour of it yet
    assert {"workload_usage_daily_p202601", "workload_usage_daily_p202602"} <= made
    removed = ledger.prune(now=DAY0 + 3 * DAY_SECONDS, retention_days=1)  # cutoff: Jan 3
    left = partitions(url)
    assert "gpu_usage_hourly_p20260101" not in left and "gpu_usage_hourly_p20260102" not in left
    assert "gpu_usage_hourly_p20260104" in left
    assert removed == 3  # Jan 1's GPU and workload hours, and its daily row (a partial month)
    assert [u.energy_joules for _, u in ledger.usage_by_gpu(0, DAY0 + 9 * DAY_SECONDS)] == [1.0]


def test_a_rolled_back_commit_takes_its_partitions_with_it(ledger: Ledger, url: str) -> None:
    later = DAY0 + 20 * DAY_SECONDS
    bad = usage_at(later)
    bad.gpu_usage[(later, "unregistered")] = Usage()
    with pytest.raises(LedgerError, match=r"(?i)foreign key"):
        ledger.commit(bad)
    assert "gpu_usage_hourly_p20260121" not in partitions(url)
    ledger.commit(usage_at(later))  # the ledger knows to create it again
    assert "gpu_usage_hourly_p20260121" in partitions(url)


def test_two_replicas_creating_one_new_day_at_once_both_commit(ledger: Ledger, url: str) -> None:
    """Two replicas (a Partitions each) whose commits both need a new day: the second
    waits for the first's transaction and then finds the day there, instead of failing its
    commit with DuplicateTable (CREATE TABLE IF NOT EXISTS does not guard that race)."""
    hour = DAY0 + 40 * DAY_SECONDS
    first, second = Partitions(), Partitions()
    with psycopg.connect(url) as a, psycopg.connect(url) as b:
        first.ensure(a, [hour])  # a's transaction holds the new partitions, uncommitted
        failed: list[BaseException] = []

        def other() -> None:
            try:
                second.ensure(b, [hour])
                b.commit()
            except BaseException as err:  # the test's assertion below reports it
                failed.append(err)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive()  # waits for a's transaction
        a.commit()
        thread.join(timeout=30)
        assert not thread.is_alive() and failed == []
    assert span_of("gpu_usage_hourly", hour)[2] in partitions(url)
