"""PostgreSQL's durable intake: an acknowledged batch is a row of ``intake_batches``,
committed before the 2xx, until the ledger commit that applies it deletes it in the same
transaction that moves the GPUs' cursors and saves its ack. No replica keeps an acknowledged
batch on its own disk; after a restart the pending rows are replayed.

Exactly once: the ack book (ack_book.py) answers a repeat of a batch this process saw; the
insert itself refuses one already pending (``UNIQUE (node, boot_id, seq)``) or already
applied (its seq in a committed ``ack_ranges`` row), so a batch another process acknowledged
is not taken twice either; and a batch replayed anyway adds nothing (the GPU cursors drop
samples at or before ``applied_until``).

A quarantined batch stays in the table, ``quarantined`` set, for an operator to read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from collector.ledger.accepted import Backlog, Saved
from collector.ledger.ack_book import AckBook, save_streams
from collector.ledger.batch_log import BatchRecord, LoggedBatch
from collector.ledger.records import batch_json
from collector.ledger.sql import Connection

#: one transaction on a connection of the intake's own (postgres.PostgresEngine)
Transaction = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]

_INSERT = (
    "INSERT INTO intake_batches (node, boot_id, seq, received_at, sample_count, body) "
    "SELECT %s, %s, %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM ack_ranges a "
    "WHERE a.node = %s AND a.boot_id = %s AND a.first_seq <= %s AND a.last_seq >= %s) "
    "ON CONFLICT (node, boot_id, seq) DO NOTHING RETURNING id"
)
_PENDING = (
    "SELECT id, node, boot_id, seq, received_at, sample_count, body FROM intake_batches "
    "WHERE NOT quarantined ORDER BY id"
)


class PgIntake:
    corrupt_records = 0  # a table has no damaged records to skip

    def __init__(self, transaction: Transaction, book: AckBook) -> None:
        self._transaction, self.book = transaction, book
        self._lock = threading.Lock()
        self._set_aside: list[int] = []
        #: pending batch id -> (received_at, bytes), in id order (oldest first)
        self._backlog: dict[int, tuple[float, int]] = {}

    @classmethod
    def open(cls, transaction: Transaction) -> PgIntake:
        with transaction() as conn:
            book = AckBook(
                conn.execute(
                    "SELECT node, boot_id, first_seq, last_seq, received_at FROM ack_ranges"
                ).fetchall()
            )
            rows = conn.execute(
                "SELECT id, node, boot_id, seq, received_at, length(body) FROM intake_batches "
                "WHERE NOT quarantined ORDER BY id"
            ).fetchall()
        intake = cls(transaction, book)
        for batch_id, node, boot, seq, at, size in rows:
            if not book.holds(node, boot, seq):
                book.add(node, boot, seq, at)
            intake._backlog[batch_id] = (at, size)
        return intake

    def record(self, entries: Sequence[BatchRecord]) -> list[int | None]:
        """Each entry's batch id, or None for a (node, boot, seq) seen before; all are
        committed on return, or none is acknowledged (LedgerError)."""
        fresh: dict[tuple[str, str, int], BatchRecord] = {}
        with self._lock:
            for e in entries:
                key = (e.node, e.boot_id, e.seq)
                if key not in fresh and not self.book.holds(*key):
                    fresh[key] = e
        # outside the lock, so health and metrics never wait on PostgreSQL; two callers
        # with the same batch meet at the table's UNIQUE constraint (one gets None)
        ids = self._insert(list(fresh.values())) if fresh else []
        given: dict[tuple[str, str, int], int] = {}
        with self._lock:
            for (key, e), bid in zip(fresh.items(), ids, strict=True):
                if bid is not None:
                    self.book.add(e.node, e.boot_id, e.seq, e.received_at)
                    self._backlog[bid] = (e.received_at, len(e.body))
                    given[key] = bid
            return [given.pop((e.node, e.boot_id, e.seq), None) for e in entries]

    def _insert(self, fresh: list[BatchRecord]) -> list[int | None]:
        rows = [
            (e.node, e.boot_id, e.seq, e.received_at, e.sample_count, e.body,
             e.node, e.boot_id, e.seq, e.seq)
            for e in fresh
        ]  # fmt: skip
        ids: list[int | None] = []
        with self._transaction() as conn:
            cursor = conn.cursor()
            cursor.executemany(_INSERT, rows, returning=True)
            while True:
                row = cursor.fetchone()
                ids.append(int(row[0]) if row is not None else None)
                if not cursor.nextset():
                    break
        return ids

    def pending(self) -> list[LoggedBatch]:
        """The pending batches, oldest first, each body as JSON (decompressed)."""
        with self._transaction() as conn:
            rows = conn.execute(_PENDING).fetchall()
        with self._lock:
            aside = set(self._set_aside)
        return [
            LoggedBatch(bid, BatchRecord(node, boot, seq, at, batch_json(bytes(body)), count))
            for bid, node, boot, seq, at, count, body in rows
            if bid not in aside
        ]

    def set_aside(self, batch_id: int) -> None:
        with self._lock:
            self._set_aside.append(batch_id)

    def has_set_aside(self) -> bool:
        with self._lock:
            return bool(self._set_aside)

    def backlog(self) -> Backlog:
        with self._lock:
            oldest = next(iter(self._backlog.values()), None)
            size = sum(n for _, n in self._backlog.values())
            return Backlog(len(self._backlog), size, oldest[0] if oldest else None)

    def save(self, conn: Connection, batches_done: Sequence[int]) -> Saved:
        """In the commit's transaction: the acks changed since the last commit, the
        applied batches deleted, the quarantined ones marked."""
        with self._lock:
            streams = self.book.take_dirty()
            aside, self._set_aside = self._set_aside, []
        save_streams(conn, streams)
        if batches_done:
            conn.execute("DELETE FROM intake_batches WHERE id = ANY(?)", (list(batches_done),))
        if aside:
            conn.execute("UPDATE intake_batches SET quarantined = true WHERE id = ANY(?)", (aside,))
        return Saved(streams, [], aside)

    def committed(self, saved: Saved, batches_done: Sequence[int]) -> None:
        with self._lock:
            for bid in (*batches_done, *saved.set_aside):
                self._backlog.pop(bid, None)

    def failed(self, saved: Saved) -> None:
        with self._lock:
            self.book.restore_dirty(saved.streams)
            self._set_aside[:0] = saved.set_aside

    def prune(self, cutoff: float) -> None:
        with self._lock:
            self.book.prune(cutoff)

    def close(self) -> None:
        return None
