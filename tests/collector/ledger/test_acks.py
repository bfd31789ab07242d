"""Acknowledged batches as seq ranges per (node, boot): exact duplicate detection whatever
the order, one row per boot in the usual case, migration from one row per batch, retention."""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.ledger.schema import MIGRATIONS, migrate
from collector.ledger.store import Ledger, LedgerWrite
from collector.ledger.writes import ACK_RETENTION_SECONDS

T0 = 1_767_225_600.0
DAY = 86_400.0


def ranges(ledger: Ledger) -> list[tuple[str, str, int, int, float]]:
    """The ``ack_ranges`` rows, after a commit (acks reach the table with the next one)."""
    ledger.commit(LedgerWrite())
    return ledger.read(
        lambda c: c.execute("SELECT * FROM ack_ranges ORDER BY node, boot_id, first_seq").fetchall()
    )


def ack(ledger: Ledger, seq: int, boot: str = "b1", at: float = T0) -> bool:
    """True when the batch is new (acknowledged now), False when it is a repeat."""
    return ledger.record_batch("n1", boot, seq, at, b"{}", 1) is not None


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    with Ledger.open(ledger_url) as opened:
        yield opened


def test_in_order_acks_are_one_row_per_boot(ledger: Ledger) -> None:
    assert all(ack(ledger, seq, at=T0 + seq) for seq in range(1, 2001))
    assert all(ack(ledger, seq, boot="b2") for seq in (1, 2, 3))
    assert ranges(ledger) == [("n1", "b1", 1, 2000, T0 + 2000), ("n1", "b2", 1, 3, T0)]
    assert not any(ack(ledger, seq) for seq in (1, 999, 2000))  # repeats, however old


def test_any_order_gives_exactly_the_set_of_seqs_seen(ledger: Ledger) -> None:
    """Ground truth: a plain set of the seqs acknowledged so far."""
    rng = random.Random(7)
    seen: set[int] = set()
    for _ in range(600):
        seq = rng.randrange(0, 120)
        assert ack(ledger, seq) is (seq not in seen), seq
        seen.add(seq)
    rows = ranges(ledger)
    covered = {s for _, _, first, last, _ in rows for s in range(first, last + 1)}
    assert covered == seen
    # ranges never touch: a gap of at least one seq between neighbours
    bounds = [(first, last) for _, _, first, last, _ in rows]
    assert all(b[0] > a[1] + 1 for a, b in itertools.pairwise(bounds))


def test_a_late_seq_that_fills_a_gap_merges_the_ranges_keeping_the_newest_time(
    ledger: Ledger,
) -> None:
    ack(ledger, 1, at=T0)
    ack(ledger, 3, at=T0 + 50)  # 2 went missing (dropped by the agent, or late)
    assert [r[2:4] for r in ranges(ledger)] == [(1, 1), (3, 3)]
    assert ack(ledger, 2, at=T0 + 10)
    assert ranges(ledger) == [("n1", "b1", 1, 3, T0 + 50)]


def test_a_range_goes_when_its_newest_ack_is_past_retention(ledger: Ledger) -> None:
    """(The batches were applied: one still pending stays in PostgreSQL's intake table,
    where it is a duplicate whatever the ack book says.)"""
    ids = [
        ledger.record_batch("n1", boot, seq, at, b"{}", 1)
        for boot, seq, at in (("old", 1, T0), ("live", 1, T0), ("live", 2, T0 + 10 * DAY))
    ]
    ledger.commit(LedgerWrite(batches_done=[i for i in ids if i is not None]))
    ledger.prune(now=T0 + ACK_RETENTION_SECONDS + DAY, retention_days=400)
    assert [(r[1], r[2], r[3]) for r in ranges(ledger)] == [("live", 1, 2)]
    assert ack(ledger, 1, boot="old")  # forgotten: an agent drops spooled batches sooner


def test_migration_turns_per_batch_acks_into_ranges(tmp_path: Path) -> None:
    """SQLite only: a ledger from before V3 exists only as a SQLite file."""
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:2])  # the schema before ranges: one ack row per batch
    rows = [("n1", "b1", s, T0 + s) for s in (*range(1, 6), *range(8, 10))]
    rows += [("n2", "b9", 4, T0)]
    conn.executemany("INSERT INTO acks VALUES (?, ?, ?, ?)", rows)
    conn.close()
    with Ledger.open(str(path)) as ledger:
        assert ranges(ledger) == [
            ("n1", "b1", 1, 5, T0 + 5),
            ("n1", "b1", 8, 9, T0 + 9),
            ("n2", "b9", 4, 4, T0),
        ]
        assert not ack(ledger, 3) and not ack(ledger, 9)  # still known after the migration
        assert ack(ledger, 6) and ack(ledger, 7)
        assert [r[2:4] for r in ranges(ledger) if r[0] == "n1"] == [(1, 9)]
        tables = {r[0] for r in ledger.read(lambda c: c.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall())}  # fmt: skip
        assert "acks" not in tables


def test_acks_not_yet_committed_are_read_back_from_the_intake(ledger_url: str) -> None:
    """An ack is durable when ``record_batch`` returns (the batch log, or PostgreSQL's
    intake table), before any commit writes it to ``ack_ranges``: after a crash the batch
    is still a duplicate."""
    path = ledger_url
    ledger = Ledger.open(path)
    assert ack(ledger, 1) and ack(ledger, 2)
    assert ledger.read(lambda c: c.execute("SELECT * FROM ack_ranges").fetchall()) == []
    ledger.close()  # no commit
    with Ledger.open(path) as again:
        assert not ack(again, 1) and not ack(again, 2) and ack(again, 3)
        assert ranges(again) == [("n1", "b1", 1, 3, T0)]
