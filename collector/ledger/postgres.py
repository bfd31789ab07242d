"""The PostgreSQL ledger: psycopg 3 over two connection pools (writes; read-only snapshots),
the schema's one migration history in PostgreSQL's dialect (pg_schema.postgres_script), the
rollup tables' time partitions (partitions.py) and the intake table (pg_intake.py).

The ledger's statements are SQLite's portable SQL (collector/ledger/sql.py); ``PgConnection``
turns their ``?`` and ``:name`` parameters into psycopg's. Errors become ``LedgerError``
naming the URL without its password (``redacted``), so logs and /readyz never hold secrets.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool

from collector.health import QuarantinedBatch
from collector.ledger.engine import Intake
from collector.ledger.partitions import Partitions
from collector.ledger.pg_intake import PgIntake
from collector.ledger.pg_schema import postgres_script
from collector.ledger.records import LedgerError
from collector.ledger.schema import MIGRATIONS
from collector.ledger.sql import Connection, Cursor, Dialect

T = TypeVar("T")

#: how long a connection attempt, and a wait for a pooled connection, may take: a
#: PostgreSQL that is down fails a write (and /readyz) within this, never hangs it
CONNECT_TIMEOUT_SECONDS = 3
POOL_SIZE = 4
#: held by the migrating transaction, so replicas starting together migrate once
_MIGRATION_LOCK = 0x6770_666C  # "gpfl"
_TOKEN = re.compile(r"'(?:[^']|'')*'|\?|:(\w+)|%")


def redacted(url: str) -> str:
    """``url`` without its password (in the authority or a ``password=`` parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", ":***@", 1)
    query = re.sub(r"(password=)[^&]*", r"\1***", parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@functools.lru_cache(maxsize=4096)
def pg_sql(sql: str, with_parameters: bool) -> str:
    """The ledger's SQL with psycopg's placeholders (``%`` doubled when parameters go)."""
    if not with_parameters:
        return sql

    def token(match: re.Match[str]) -> str:
        text = match.group(0)
        if text.startswith("'"):
            return text
        if text == "?":
            return "%s"
        if text == "%":
            return "%%"
        return f"%({match.group(1)})s"

    return _TOKEN.sub(token, sql)


class _NoRows:
    rowcount = 0

    def fetchone(self) -> Any:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class PgConnection:
    """A psycopg connection as a ``sql.Connection``; ``raw`` for PostgreSQL's own SQL."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Any = None, /) -> Cursor:
        params = parameters or None
        return self.raw.execute(pg_sql(sql, params is not None), params)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor:
        rows = list(parameters)
        if not rows:
            return _NoRows()
        cursor = self.raw.cursor()
        cursor.executemany(pg_sql(sql, True), rows)
        return cursor


def migrate(conn: psycopg.Connection[Any], url: str) -> int:
    """Bring the schema up to ``len(MIGRATIONS)``, one transaction per version."""
    for version in range(1, len(MIGRATIONS) + 1):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            if current > len(MIGRATIONS):
                raise LedgerError(
                    f"ledger {url}: schema version {current} is newer than this gpufleet "
                    f"understands (up to {len(MIGRATIONS)}); run a newer gpufleet"
                )
            if current >= version:
                continue
            script = postgres_script(version)
            if script.strip():
                conn.execute(script.encode())  # bytes: no placeholders, '%' as written
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version VALUES (%s)", (version,))
    return len(MIGRATIONS)


class PostgresEngine:
    """Writes one at a time per process (as SQLite's), reads beside them on REPEATABLE
    READ snapshots; the intake has connections of its own, so an ack never waits for a
    commit."""

    dialect: Dialect = "postgresql"
    quarantine_dir: Path | None = None  # quarantined batches stay in intake_batches
    quarantine_kept_in = "the ledger's intake_batches row {id} (quarantined; body: the batch)"

    def __init__(
        self, url: str, writes: ConnectionPool, reads: ConnectionPool, shard_count: int = 64
    ) -> None:
        self.url = redacted(url)
        #: the intake's rows carry shard_of(node, this): cluster.shard_count
        self.shard_count = shard_count
        self._writes, self._reads = writes, reads
        self._write_lock = threading.Lock()
        self._partitions = Partitions()

    @classmethod
    def open(cls, url: str, shard_count: int = 64) -> PostgresEngine:
        """Connect, migrate, open the pools; LedgerError naming the URL when it cannot."""
        try:
            with psycopg.connect(
                url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
            ) as c:
                migrate(c, redacted(url))
        except psycopg.Error as err:
            raise LedgerError(_message(url, "cannot open the ledger", err)) from err
        writes, reads = _pool(url, "writes", read_only=False), _pool(url, "reads", read_only=True)
        return cls(url, writes, reads, shard_count)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction; it bumps ``ledger_version`` (every replica's read caches
        key on it, ``version``)."""
        with self._write_lock, self._transaction() as raw:
            yield PgConnection(raw)
            raw.execute("SELECT nextval('ledger_version')")

    def version(self) -> int:
        """The ledger-wide write count (a sequence: moves with any replica's writes)."""
        try:
            with self._reads.connection() as raw:
                row = raw.execute("SELECT last_value FROM ledger_version").fetchone()
        except psycopg.Error as err:
            raise LedgerError(_message(self.url, "ledger read failed", err)) from err
        return int(row[0]) if row else 0

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A write transaction on a pooled connection (the intake's take no lock)."""
        try:
            with self._writes.connection() as raw, raw.transaction():
                yield raw
        except BaseException as err:
            self._partitions.forget()  # partitions it created were rolled back
            if isinstance(err, psycopg.Error):
                raise LedgerError(_message(self.url, "ledger write failed", err)) from err
            raise

    def read(self, query: Callable[[Connection], T]) -> T:
        try:
            with self._reads.connection() as raw, raw.transaction():
                return query(PgConnection(raw))
        except psycopg.Error as err:
            raise LedgerError(_message(self.url, "ledger read failed", err)) from err

    def open_intake(self) -> Intake:
        return PgIntake.open(self._transaction, self.shard_count)

    def quarantined_batches(self) -> list[QuarantinedBatch]:
        """The intake rows set aside, with why and when (a row quarantined by a version
        that did not record it says so)."""
        rows = self.read(
            lambda conn: conn.execute(
                "SELECT id, node, boot_id, seq, received_at, sample_count, quarantined_at, "
                "quarantine_error FROM intake_batches WHERE quarantined ORDER BY id"
            ).fetchall()
        )
        return [
            QuarantinedBatch(int(bid), node, boot, int(seq), float(received), int(count),
                             float(at or 0.0), error or "(reason not recorded)")
            for bid, node, boot, seq, received, count, at, error in rows
        ]  # fmt: skip

    def prepare(self, conn: Connection, hours: Iterable[float]) -> None:
        assert isinstance(conn, PgConnection)
        self._partitions.ensure(conn.raw, hours)

    def drop_expired(self, conn: Connection, day_cutoff: float) -> int:
        assert isinstance(conn, PgConnection)
        return self._partitions.drop_before(conn.raw, day_cutoff)

    def space_problem(self) -> str | None:
        return None  # the server's disk: PostgreSQL answers a failed write for it

    def close(self) -> None:
        self._writes.close()
        self._reads.close()


def _pool(url: str, role: str, *, read_only: bool) -> ConnectionPool:
    def configure(conn: psycopg.Connection[Any]) -> None:
        if read_only:  # each read is one snapshot of all its statements
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True

    return ConnectionPool(
        url,
        min_size=1,
        max_size=POOL_SIZE,
        timeout=CONNECT_TIMEOUT_SECONDS,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS},
        configure=configure,
        check=ConnectionPool.check_connection,
        name=f"gpufleet-ledger-{role}",
        open=True,
    )


def _message(url: str, what: str, err: BaseException) -> str:
    """``what`` failed on the ledger at ``url`` (redacted), why, and what to do."""
    safe = redacted(url)
    text = str(err).strip()
    password = urlsplit(url).password
    if password:
        text = text.replace(password, "***")
    if isinstance(err, psycopg.OperationalError):
        return (
            f"{what}: PostgreSQL at {safe} does not answer ({text}); check that the server "
            "runs, accepts connections from here, and that ledger.url is right"
        )
    return f"{what} on PostgreSQL at {safe}: {type(err).__name__}: {text}"
