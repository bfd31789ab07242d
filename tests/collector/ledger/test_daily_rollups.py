"""Schema V5's daily workload rollups: a range of whole UTC days reads a row a day, and
any range answers the sums of its hours, partial days at both ends included."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.ledger.schema import MIGRATIONS, migrate
from collector.ledger.store import Ledger, LedgerWrite
from collector.records import DAY_SECONDS, HOUR_SECONDS, Usage
from tests.collector.ledger.test_store import JOB, POD, registered

DAY0 = 1_700_006_400.0  # a UTC midnight (2023-11-15)
assert DAY0 % DAY_SECONDS == 0
#: (hour offset from DAY0, workload key, joules): 4 days of hours, two workloads
DELTAS = [(h, POD.key if h % 3 else JOB.key, 1000.0 + 7 * h) for h in range(0, 4 * 24, 1)]


def hourly_sum(key: str, start: float, end: float) -> float:
    """Ground truth: the deltas whose hour starts in [start, end)."""
    return sum(j for h, k, j in DELTAS if k == key and start <= DAY0 + h * HOUR_SECONDS < end)


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    opened = Ledger.open(ledger_url)
    registered(opened)
    for part in (DELTAS[:50], DELTAS[50:]):  # two commits: the day rows add up across them
        usage = {
            (DAY0 + h * HOUR_SECONDS, k): Usage(energy_joules=j, cost=j / 10) for h, k, j in part
        }
        opened.commit(LedgerWrite(workload_usage=usage))
    yield opened
    opened.close()


def joules(ledger: Ledger, start: float, end: float) -> dict[str, float]:
    return {ref.key: u.energy_joules for ref, u in ledger.usage_by_workload(start, end)}


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 4 * 24), hours=st.integers(1, 4 * 24))
def test_any_range_of_hours_sums_its_hours(tmp_path_factory: pytest.TempPathFactory,
                                           first: int, hours: int) -> None:  # fmt: skip
    ledger = _ledger.get(tmp_path_factory)
    start, end = DAY0 + first * HOUR_SECONDS, DAY0 + (first + hours) * HOUR_SECONDS
    got = joules(ledger, start, end)
    for key in (POD.key, JOB.key):
        assert got.get(key, 0.0) == pytest.approx(hourly_sum(key, start, end))


class _Shared:
    """One ledger for every Hypothesis example (building it is the slow part)."""

    def __init__(self) -> None:
        self.ledger: Ledger | None = None

    def get(self, factory: pytest.TempPathFactory) -> Ledger:
        if self.ledger is None:
            self.ledger = Ledger.open(str(factory.mktemp("daily") / "ledger.db"))
            registered(self.ledger)
            usage = {(DAY0 + h * HOUR_SECONDS, k): Usage(energy_joules=j) for h, k, j in DELTAS}
            self.ledger.commit(LedgerWrite(workload_usage=usage))
        return self.ledger


_ledger = _Shared()


def test_a_range_with_partial_days_at_both_ends_reads_whole_days_from_the_daily_rows(
    ledger: Ledger,
) -> None:
    """05:00 on day 0 to 19:00 on day 3: hours at both ends, days 1 and 2 whole. With the
    hourly rows of days 1 and 2 deleted behind the ledger's back, the answer is the same:
    those days came from their daily rows."""
    start, end = DAY0 + 5 * HOUR_SECONDS, DAY0 + 3 * DAY_SECONDS + 19 * HOUR_SECONDS
    before = joules(ledger, start, end)
    assert before == pytest.approx({k: hourly_sum(k, start, end) for k in (POD.key, JOB.key)})
    with ledger.write_transaction() as conn:
        deleted = conn.execute(
            "DELETE FROM workload_usage_hourly WHERE hour_start >= ? AND hour_start < ?",
            (DAY0 + DAY_SECONDS, DAY0 + 3 * DAY_SECONDS),
        ).rowcount
    assert deleted == 48
    assert joules(ledger, start, end) == pytest.approx(before)
    costs = {ref.key: u.cost for ref, u in ledger.usage_by_workload(start, end)}
    assert costs == pytest.approx({k: v / 10 for k, v in before.items()})


def test_migrating_a_v4_ledger_fills_the_daily_rows_from_its_hours(tmp_path: Path) -> None:
    """SQLite only: a V4 ledger exists only as a SQLite file."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:4])
    conn.execute("INSERT INTO workloads VALUES (?, ?, ?, ?, ?, ?)",
                 (POD.key, POD.kind, POD.name, POD.namespace, POD.team, POD.user))  # fmt: skip
    for h in (1, 2, 25, 26, 27):  # two hours of day 0, three of day 1
        conn.execute(
            "INSERT INTO workload_usage_hourly (hour_start, workload_key, energy_joules) "
            "VALUES (?, ?, ?)",
            (DAY0 + h * HOUR_SECONDS, POD.key, 10.0 * h),
        )
    conn.close()
    ledger = Ledger.open(str(path))
    days = ledger.read(
        lambda c: c.execute(
            "SELECT day_start, energy_joules FROM workload_usage_daily ORDER BY day_start"
        ).fetchall()
    )
    assert days == [(DAY0, 30.0), (DAY0 + DAY_SECONDS, 780.0)]
    assert joules(ledger, DAY0, DAY0 + 2 * DAY_SECONDS) == {POD.key: 810.0}
    ledger.close()
