"""The ledger's accepted batches: acknowledging them (``AckBook``) and keeping them until
applied (``BatchLog``), and what each ledger commit writes of both.

An ack costs no SQL: the book says whether a (node, boot, seq) was seen, the log makes the
batch durable. Each commit then writes, in the commit's transaction, the ack ranges changed
since the one before and the ids of the batches it applied (``intake_done``); after it, the
log deletes segments with nothing left pending. Opening reads back what the last process left:
the acks in ``ack_ranges`` and in the log, and as pending every batch in the log that
``intake_done`` does not name.

A batch that cannot be applied is quarantined (``set_aside``, after collector/ledger/
quarantine.py has copied it): the next commit marks it done as if applied. The backlog
(pending batches, their bytes, the oldest's arrival) is kept here for health and metrics.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from collector.ledger.ack_book import AckBook, Stream, load_rows, save_streams
from collector.ledger.batch_log import BatchLog, BatchLogError, BatchRecord, LoggedBatch
from collector.ledger.records import LedgerError, batch_json
from collector.ledger.sql import Connection


class Saved(NamedTuple):
    """What one commit wrote of the accepted batches (given back if the commit fails)."""

    streams: dict[Stream, list[tuple[int, int, float]]]
    forgotten: list[int]
    set_aside: list[int]


class Backlog(NamedTuple):
    """Acknowledged batches not yet applied: how many, their bytes as stored, and when the
    oldest arrived (None when there is none)."""

    batches: int
    bytes: int
    oldest_received_at: float | None


class PendingBook:
    """What either intake (this batch log, or PostgreSQL's table: pg_intake.py) keeps of
    its pending batches in memory, behind its one lock: which are quarantined and wait to
    be marked done by the next commit, and the backlog's size and age."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: quarantined batches, marked done by the next commit
        self._set_aside: list[int] = []
        #: each one's (quarantined at, why) until that commit, for an intake that keeps it
        self._why: dict[int, tuple[float, str]] = {}
        #: pending batch id -> (received_at, bytes), in id order (oldest first)
        self._backlog: dict[int, tuple[float, int]] = {}

    def set_aside(self, batch_id: int, at: float = 0.0, error: str = "") -> None:
        """Mark a quarantined batch done in the next commit (it is never applied),
        quarantined at ``at`` because of ``error``."""
        with self._lock:
            self._set_aside.append(batch_id)
            self._why[batch_id] = (at, error)

    def has_set_aside(self) -> bool:
        with self._lock:
            return bool(self._set_aside)

    def backlog(self) -> Backlog:
        with self._lock:
            oldest = next(iter(self._backlog.values()), None)
            size = sum(n for _, n in self._backlog.values())
            return Backlog(len(self._backlog), size, oldest[0] if oldest else None)


class AcceptedBatches(PendingBook):
    """The log and the book behind one lock, for one ``Ledger``."""

    def __init__(self, log: BatchLog, book: AckBook) -> None:
        super().__init__()
        self.log, self.book = log, book
        #: segments deleted since the last commit: their ``intake_done`` rows go with it
        self._forgotten: list[int] = []

    @classmethod
    def open(
        cls, conn: sqlite3.Connection, directory: Path | None, *, sync: bool
    ) -> AcceptedBatches:
        """Open the log in ``directory`` (None: memory) in ``conn``'s write transaction."""
        try:
            log = BatchLog(directory, sync=sync)
        except (BatchLogError, OSError) as err:
            raise LedgerError(f"ledger: {err}") from err
        try:
            return cls._resume(conn, log)
        except BaseException:
            log.close()
            raise

    @classmethod
    def _resume(cls, conn: sqlite3.Connection, log: BatchLog) -> AcceptedBatches:
        # the bodies found at open are not kept: ``pending`` reads them back when wanted
        found, log.found = log.found, []
        book = AckBook(load_rows(conn))
        for record in found:
            e = record.entry
            if e.node and not book.holds(e.node, e.boot_id, e.seq):
                book.add(e.node, e.boot_id, e.seq, e.received_at)
        accepted = cls(log, book)
        accepted._adopt_legacy_rows(conn)
        done = {int(r[0]) for r in conn.execute("SELECT batch_id FROM intake_done")}
        log.mark_done([r.batch_id for r in found if r.batch_id in done])
        accepted._backlog = {
            r.batch_id: (r.entry.received_at, len(r.entry.body))
            for r in found
            if r.batch_id not in done
        }
        kept = log.segments()
        conn.execute(
            f"DELETE FROM intake_done WHERE batch_id >> 32 NOT IN ({','.join('?' * len(kept))})",
            kept,
        )
        return accepted

    def _adopt_legacy_rows(self, conn: sqlite3.Connection) -> None:
        """Move the ``pending_batches`` rows of a ledger from before the batch log (schema
        3) into it. Their acks are in ``ack_ranges`` already. A crash before this
        transaction commits adopts them again: a batch replayed twice is harmless (the
        second copy's samples have the timestamps of the first and are dropped)."""
        rows = conn.execute(
            "SELECT received_at, sample_count, body FROM pending_batches ORDER BY id"
        ).fetchall()
        if rows:
            self._append([BatchRecord("", "", -1, at, bytes(b), n) for at, n, b in rows])
            conn.execute("DELETE FROM pending_batches")

    @property
    def corrupt_records(self) -> int:
        """Damaged records the batch log skipped when it was opened."""
        return self.log.corrupt_records

    def record(self, entries: Sequence[BatchRecord]) -> list[int | None]:
        """Acknowledge each entry: its batch id, or None for a (node, boot, seq) seen
        before (in ``entries`` too). All are durable on return, or none is acknowledged."""
        with self._lock:
            out: list[int | None] = []
            fresh: list[BatchRecord] = []
            seen: set[tuple[str, str, int]] = set()
            for e in entries:
                key = (e.node, e.boot_id, e.seq)
                if key in seen or self.book.holds(*key):
                    out.append(None)
                else:
                    seen.add(key)
                    fresh.append(e)
                    out.append(0)
            appended = self._append(fresh)
            for e, bid in zip(fresh, appended, strict=True):
                self.book.add(e.node, e.boot_id, e.seq, e.received_at)
                self._backlog[bid] = (e.received_at, len(e.body))
            ids = iter(appended)
            return [None if slot is None else next(ids) for slot in out]

    def _append(self, entries: list[BatchRecord]) -> list[int]:
        if not entries:
            return []
        try:
            return self.log.append(entries)
        except BatchLogError as err:
            raise LedgerError(f"ledger: {err}") from err

    def pending(self) -> list[LoggedBatch]:
        """The pending batches as logged, each body as JSON (decompressed)."""
        with self._lock:
            return [
                LoggedBatch(r.batch_id, r.entry._replace(body=batch_json(r.entry.body)))
                for r in self.log.pending()
            ]

    def save(self, conn: Connection, batches_done: Sequence[int]) -> Saved:
        """Write the acks changed since the last commit and ``batches_done`` in ``conn``'s
        transaction. Pass the token it returns to ``committed`` or ``failed``."""
        with self._lock:
            streams = self.book.take_dirty()
            forgotten, self._forgotten = self._forgotten, []
            aside, self._set_aside = self._set_aside, []
        batches_done = [*batches_done, *aside]
        save_streams(conn, streams)
        if self.log.directory is not None:  # a memory log is never read back
            conn.executemany(
                "INSERT OR IGNORE INTO intake_done VALUES (?)", [(i,) for i in batches_done]
            )
            conn.executemany(
                "DELETE FROM intake_done WHERE batch_id >= ? AND batch_id < ?",
                [(n << 32, (n + 1) << 32) for n in forgotten],
            )
        return Saved(streams, forgotten, aside)

    def committed(self, saved: Saved, batches_done: Sequence[int]) -> None:
        done = [*batches_done, *saved.set_aside]
        with self._lock:
            self._forgotten.extend(self.log.mark_done(done))
            for bid in done:
                self._backlog.pop(bid, None)
                self._why.pop(bid, None)

    def failed(self, saved: Saved) -> None:
        """The commit that ``save`` wrote into was rolled back: write it all next time."""
        with self._lock:
            self.book.restore_dirty(saved.streams)
            self._forgotten.extend(saved.forgotten)
            self._set_aside[:0] = saved.set_aside

    def prune(self, cutoff: float) -> None:
        with self._lock:
            self.book.prune(cutoff)

    def close(self) -> None:
        with self._lock:
            self.log.close()
