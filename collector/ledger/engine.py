"""The ledger's two backends behind one interface: how a ``Ledger`` runs its transactions,
where its acknowledged batches wait (the intake), and what each backend adds to a commit
or a prune. ``SqliteEngine`` is the embedded default; ``PostgresEngine``
(collector/ledger/postgres.py) the shared one. ``Ledger.open`` picks one by URL.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from collector.health import QuarantinedBatch
from collector.ledger.accepted import AcceptedBatches, Backlog, Saved
from collector.ledger.batch_log import BatchRecord, LoggedBatch
from collector.ledger.files import low_space
from collector.ledger.records import LedgerError
from collector.ledger.schema import connect, migrate, sqlite_path
from collector.ledger.sql import Connection, Dialect

T = TypeVar("T")


class Intake(Protocol):
    """Acknowledged batches until applied (collector/ledger/accepted.py has the contract)."""

    @property
    def corrupt_records(self) -> int: ...

    def record(self, entries: Sequence[BatchRecord]) -> list[int | None]: ...
    def pending(self) -> list[LoggedBatch]: ...
    def set_aside(self, batch_id: int, at: float = 0.0, error: str = "") -> None: ...
    def has_set_aside(self) -> bool: ...
    def backlog(self) -> Backlog: ...
    def save(self, conn: Connection, batches_done: Sequence[int]) -> Saved: ...
    def committed(self, saved: Saved, batches_done: Sequence[int]) -> None: ...
    def failed(self, saved: Saved) -> None: ...
    def prune(self, cutoff: float) -> None: ...
    def close(self) -> None: ...


class ShardedIntake(Intake, Protocol):
    """PostgreSQL's intake, which replicas share: pending batches by shard."""

    def pending(
        self, shards: Sequence[int] | None = None, known: Sequence[int] = ()
    ) -> list[LoggedBatch]: ...
    def pending_shards(self) -> dict[int, int]: ...


class Engine(Protocol):
    dialect: Dialect
    #: where quarantined batches are copied (None: kept in memory)
    quarantine_dir: Path | None
    #: where a quarantined batch stays without that directory (``{id}``: its id)
    quarantine_kept_in: str

    def write(self) -> AbstractContextManager[Connection]:
        """One write transaction, committed on exit, rolled back on error (LedgerError)."""
        ...

    def read(self, query: Callable[[Connection], T]) -> T:
        """``query`` on one read snapshot (LedgerError when the database fails)."""
        ...

    def open_intake(self) -> Intake: ...

    def quarantined_batches(self) -> list[QuarantinedBatch]:
        """The batches quarantined before this process, where the engine keeps them
        itself (PostgreSQL's intake rows); SQLite's are read from ``quarantine_dir``."""
        ...

    def prepare(self, conn: Connection, hours: Iterable[float]) -> None:
        """What rollup rows of these hours need before they go in (PostgreSQL: their
        partitions)."""
        ...

    def drop_expired(self, conn: Connection, day_cutoff: float) -> int:
        """Drop whole partitions before ``day_cutoff``; rows deleted by them (estimate)."""
        ...

    def space_problem(self) -> str | None: ...
    def close(self) -> None: ...


class SqliteEngine:
    """One writer connection and (for files) one reader connection, each behind its own
    lock, so API reads run beside the writer (WAL); the intake is the batch log."""

    dialect: Dialect = "sqlite"
    quarantine_kept_in = "this process's memory only (a memory ledger)"

    def __init__(
        self, writer: sqlite3.Connection, reader: sqlite3.Connection, intake_dir: Path | None,
        sync_intake: bool,
    ) -> None:  # fmt: skip
        self._writer, self._reader = writer, reader
        self._write_lock = threading.Lock()
        # ":memory:" has one connection for both; one lock then guards it
        self._read_lock = self._write_lock if reader is writer else threading.Lock()
        self._intake_dir, self._sync_intake = intake_dir, sync_intake
        self.quarantine_dir = intake_dir / "quarantine" if intake_dir else None

    @classmethod
    def open(cls, url: str, synchronous: str) -> SqliteEngine:
        path = sqlite_path(url)
        writer = connect(path, synchronous)
        try:
            migrate(writer)
            reader = writer if path == ":memory:" else connect(path, synchronous)
        except (LedgerError, sqlite3.Error) as err:
            writer.close()
            raise LedgerError(str(err)) from err
        intake_dir = None if path == ":memory:" else Path(path + "-intake")
        return cls(writer, reader, intake_dir, sync_intake=synchronous == "FULL")

    def write(self) -> AbstractContextManager[Connection]:
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock:
            conn = self._writer
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException as err:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(err, sqlite3.Error):
                    raise LedgerError(f"ledger write failed: {err}") from err
                raise

    def read(self, query: Callable[[Connection], T]) -> T:
        with self._read_lock:
            conn = self._reader
            try:
                conn.execute("BEGIN")  # one snapshot for all of the query's statements
                try:
                    return query(conn)
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as err:
                raise LedgerError(f"ledger read failed: {err}") from err

    def quarantined_batches(self) -> list[QuarantinedBatch]:
        return []

    def open_intake(self) -> Intake:
        """The batch log, opened (and locked for this process) in a write transaction."""
        with self._transaction() as conn:
            return AcceptedBatches.open(conn, self._intake_dir, sync=self._sync_intake)

    def prepare(self, conn: Connection, hours: Iterable[float]) -> None:
        return None

    def drop_expired(self, conn: Connection, day_cutoff: float) -> int:
        return 0

    def space_problem(self) -> str | None:
        """Whether the ledger's volume has too little free space (files.low_space)."""
        if self._intake_dir is None:
            return None
        return low_space(self._intake_dir.parent, self._sync_intake)

    def close(self) -> None:
        with self._write_lock:
            if self._reader is not self._writer:
                self._reader.close()
            self._writer.close()
