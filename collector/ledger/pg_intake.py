"""PostgreSQL's durable intake: an acknowledged batch is a row of ``intake_batches``,
committed before the 2xx, until the ledger commit that applies it deletes it in the same
transaction that moves the GPUs' cursors and saves its ack. No replica keeps an acknowledged
batch on its own disk; after a restart the pending rows are replayed.

Exactly once: the ack book (ack_book.py) answers a repeat of a batch this process saw; the
insert itself refuses one already pending (``UNIQUE (node, boot_id, seq)``) or already
applied (its seq in a committed ``ack_ranges`` row), so a batch another process acknowledged
is not taken twice either; and a batch replayed anyway adds nothing (the GPU cursors drop
samples at or before ``applied_until``).

Several replicas share the table (collector/replicas.py): any of them inserts, each row
carrying its node's shard, and the shard's owner applies it. So the acks are written by
whoever applies, row by row (``save_acks``: the applied batch's seq extends the range
ending just below it, or starts one, and the one just above joins it): whoever
acknowledged a batch writes its ack with its next commit, and whoever applies it again in
the transaction that deletes it. Never a stream's rows rewritten from one process's
memory, which would drop another's acks. The book in memory is a cache of what this
process acknowledged, never written.

A quarantined batch stays in the table, ``quarantined`` set, for an operator to read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from collector.cluster.shards import shard_of
from collector.ledger.accepted import PendingBook, Saved
from collector.ledger.ack_book import AckBook
from collector.ledger.batch_log import BatchRecord, LoggedBatch
from collector.ledger.records import batch_json
from collector.ledger.sql import Connection

#: one transaction on a connection of the intake's own (postgres.PostgresEngine)
Transaction = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]

_INSERT = (
    "INSERT INTO intake_batches (node, boot_id, seq, received_at, sample_count, body, shard) "
    "SELECT %s, %s, %s, %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM ack_ranges a "
    "WHERE a.node = %s AND a.boot_id = %s AND a.first_seq <= %s AND a.last_seq >= %s) "
    "ON CONFLICT (node, boot_id, seq) DO NOTHING RETURNING id"
)
_PENDING = (
    "SELECT id, node, boot_id, seq, received_at, sample_count, body FROM intake_batches "
    "WHERE NOT quarantined AND (%(shards)s::int[] IS NULL OR shard = ANY(%(shards)s)) "
    "AND id <> ALL(%(known)s) ORDER BY id"
)
#: an applied batch's ack, row by row: its seq extends the range ending just below it,
#: else starts one (unless a range holds it already: a batch replayed after a crash)
_ACK = (  # the ledger's portable parameters: it runs on the commit's sql.Connection
    "WITH grown AS (UPDATE ack_ranges SET last_seq = :seq, received_at = "
    "GREATEST(received_at, :at) WHERE node = :node AND boot_id = :boot "
    "AND last_seq = :seq - 1 RETURNING 1) "
    "INSERT INTO ack_ranges (node, boot_id, first_seq, last_seq, received_at) "
    "SELECT :node, :boot, :seq, :seq, :at WHERE NOT EXISTS (SELECT 1 FROM grown) "
    "AND NOT EXISTS (SELECT 1 FROM ack_ranges WHERE node = :node AND boot_id = :boot "
    "AND first_seq <= :seq AND last_seq >= :seq) ON CONFLICT DO NOTHING"
)
#: then the range starting just above it, if any, joins it (a late seq closed a gap)
_JOIN = (
    "WITH above AS (DELETE FROM ack_ranges WHERE node = :node AND boot_id = :boot "
    "AND first_seq = :seq + 1 RETURNING last_seq, received_at) "
    "UPDATE ack_ranges SET last_seq = above.last_seq, "
    "received_at = GREATEST(ack_ranges.received_at, above.received_at) FROM above "
    "WHERE node = :node AND boot_id = :boot AND ack_ranges.last_seq = :seq"
)


class PgIntake(PendingBook):
    corrupt_records = 0  # a table has no damaged records to skip

    def __init__(self, transaction: Transaction, book: AckBook, shard_count: int) -> None:
        super().__init__()
        self._transaction, self.book = transaction, book
        self.shard_count = shard_count
        #: (node, boot, seq, received_at) acknowledged here since the last commit
        self._new_acks: list[tuple[str, str, int, float]] = []
        self._saving: list[tuple[str, str, int, float]] = []  # those of the commit under way

    @classmethod
    def open(cls, transaction: Transaction, shard_count: int) -> PgIntake:
        """The intake; rows without a shard (copied by ``ledger migrate``, or inserted
        before schema 8) get theirs here."""
        with transaction() as conn:
            unsharded = conn.execute(
                "SELECT id, node FROM intake_batches WHERE shard IS NULL"
            ).fetchall()
            conn.cursor().executemany(
                "UPDATE intake_batches SET shard = %s WHERE id = %s",
                [(shard_of(node, shard_count), bid) for bid, node in unsharded],
            )
            book = AckBook(
                conn.execute(
                    "SELECT node, boot_id, first_seq, last_seq, received_at FROM ack_ranges"
                ).fetchall()
            )
            rows = conn.execute(
                "SELECT id, node, boot_id, seq, received_at, length(body) FROM intake_batches "
                "WHERE NOT quarantined ORDER BY id"
            ).fetchall()
        intake = cls(transaction, book, shard_count)
        for batch_id, node, boot, seq, at, size in rows:
            if not book.holds(node, boot, seq):
                book.add(node, boot, seq, at)
                intake._new_acks.append((node, boot, seq, at))
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
                    self._new_acks.append((e.node, e.boot_id, e.seq, e.received_at))
                    self._backlog[bid] = (e.received_at, len(e.body))
                    given[key] = bid
            return [given.pop((e.node, e.boot_id, e.seq), None) for e in entries]

    def _insert(self, fresh: list[BatchRecord]) -> list[int | None]:
        rows = [
            (e.node, e.boot_id, e.seq, e.received_at, e.sample_count, e.body,
             shard_of(e.node, self.shard_count), e.node, e.boot_id, e.seq, e.seq)
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

    def pending(
        self, shards: Sequence[int] | None = None, known: Sequence[int] = ()
    ) -> list[LoggedBatch]:
        """The pending batches (of ``shards``; None: all), oldest first, each body as JSON
        (decompressed), without the ids in ``known`` (those the caller has already)."""
        args = {"shards": None if shards is None else list(shards), "known": list(known)}
        with self._transaction() as conn:
            rows = conn.execute(_PENDING, args).fetchall()
        with self._lock:
            aside = set(self._set_aside)
        return [
            LoggedBatch(bid, BatchRecord(node, boot, seq, at, batch_json(bytes(body)), count))
            for bid, node, boot, seq, at, count, body in rows
            if bid not in aside
        ]

    def save(self, conn: Connection, batches_done: Sequence[int]) -> Saved:
        """In the commit's transaction: the applied batches' acks saved and the batches
        deleted, the quarantined ones marked (their rows keep their acks)."""
        with self._lock:
            self.book.take_dirty()  # a cache here: the acks go row by row (save_acks)
            aside, self._set_aside = self._set_aside, []
            why = [(*self._why.get(bid, (0.0, "")), bid) for bid in aside]
            acks, self._new_acks = self._new_acks, []
        done = conn.execute(
            "SELECT node, boot_id, seq, received_at FROM intake_batches WHERE id = ANY(?)",
            (list(batches_done),),
        ).fetchall() if batches_done else []  # fmt: skip
        save_acks(conn, [*acks, *done])
        if batches_done:
            conn.execute("DELETE FROM intake_batches WHERE id = ANY(?)", (list(batches_done),))
        if aside:
            conn.executemany(
                "UPDATE intake_batches SET quarantined = true, quarantined_at = ?, "
                "quarantine_error = ? WHERE id = ?",
                why,
            )
        self._saving = acks
        return Saved({}, [], aside)

    def pending_shards(self) -> dict[int, int]:
        """Pending batch id -> its shard, of every replica's (cheap: no bodies); this
        process's backlog forgets the batches gone (applied by whichever owner)."""
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT id, shard FROM intake_batches WHERE NOT quarantined"
            ).fetchall()
        found = {int(bid): int(shard) for bid, shard in rows}
        with self._lock:
            for bid in [b for b in self._backlog if b not in found]:
                del self._backlog[bid]
        return found

    def committed(self, saved: Saved, batches_done: Sequence[int]) -> None:
        with self._lock:
            for bid in (*batches_done, *saved.set_aside):
                self._backlog.pop(bid, None)
                self._why.pop(bid, None)

    def failed(self, saved: Saved) -> None:
        with self._lock:
            self._new_acks[:0] = self._saving
            self._set_aside[:0] = saved.set_aside

    def prune(self, cutoff: float) -> None:
        with self._lock:
            self.book.prune(cutoff)

    def close(self) -> None:
        return None


def save_acks(conn: Connection, acks: Sequence[tuple[str, str, int, float]]) -> None:
    """Write ``acks`` (node, boot, seq, received_at) to ``ack_ranges`` row by row, in seq
    order per stream, so consecutive seqs grow one range."""
    rows = [{"node": n, "boot": b, "seq": q, "at": a} for n, b, q, a in sorted(set(acks))]
    conn.executemany(_ACK, rows)
    conn.executemany(_JOIN, rows)
