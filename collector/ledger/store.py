"""The collector's durable state, on one of two backends (collector/ledger/engine.py):
SQLite in WAL mode with the batch log of acknowledged batches beside it
(collector/ledger/batch_log.py), or PostgreSQL with its intake table
(collector/ledger/postgres.py, pg_intake.py). ``Ledger.open`` picks one by URL; callers do
not care which.

Why nothing is lost or counted twice across ``kill -9``: ``record_batches`` makes the
batches durable (the batch log, fdatasynced with ``synchronous=FULL``; or committed to
PostgreSQL's ``intake_batches``) before the HTTP layer answers 2xx; ``commit`` adds the
rollup deltas, moves the GPUs' cursors, and records the acks and which batches are now
applied, in one transaction. After a restart the applier replays ``pending_batches()``
and skips samples at or before each GPU's ``cursors()[uuid].applied_until``.

Threads: the engine runs writes one at a time and reads beside them, each on a snapshot.
The accepted batches have a lock of their own, so an ack does not wait for a commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from collector.ledger import queries as queries
from collector.ledger import recommendations as recs
from collector.ledger.accepted import Backlog
from collector.ledger.batch_log import BatchRecord, LoggedBatch
from collector.ledger.engine import Engine, Intake, ShardedIntake, SqliteEngine
from collector.ledger.quarantine import Quarantine, QuarantineSummary
from collector.ledger.queries import Group
from collector.ledger.records import (
    GpuCursor,
    GpuRecord,
    LedgerError,
    LedgerWrite,
    WorkloadStatsDelta,
)
from collector.ledger.schema import is_postgres_url, sqlite_path
from collector.ledger.sql import Connection
from collector.ledger.writes import (
    ACK_RETENTION_SECONDS,
    apply_write,
    prune,
)
from collector.records import (
    DAY_SECONDS,
    IdleEpisode,
    ModelHour,
    ModelUsage,
    Recommendation,
    RecommendationStatus,
    Usage,
    WorkloadProfile,
    WorkloadRef,
)

__all__ = [
    "ACK_RETENTION_SECONDS",
    "BatchRecord",
    "GpuCursor",
    "GpuRecord",
    "Ledger",
    "LedgerError",
    "LedgerWrite",
    "WorkloadStatsDelta",
    "sqlite_path",
]

T = TypeVar("T")


class Ledger:
    def __init__(self, engine: Engine) -> None:
        """The intake is opened, and on SQLite its batch log locked for this process, by
        the first call that needs it (``record_batches``, ``pending_batches``,
        ``commit``), so readers such as ``gpufleet report`` never touch it."""
        self.engine = engine
        self._accepted: Intake | None = None
        self._accepted_open_lock = threading.Lock()
        #: batches that cannot be applied, kept aside (collector/ledger/quarantine.py)
        self._quarantine = Quarantine(
            engine.quarantine_dir, engine.quarantined_batches(), engine.quarantine_kept_in
        )
        #: write transactions committed by this process: the read views' cache key for
        #: what comes from the ledger (rollups, recommendations; collector/http/views.py)
        self.writes = 0

    @classmethod
    def open(cls, url: str, *, synchronous: str = "FULL", shard_count: int = 64) -> Ledger:
        """Open (creating and migrating as needed) the ledger at ``url``: a SQLite path,
        ``sqlite:///path``, ``:memory:`` or a ``postgresql://`` URL.

        ``synchronous`` (SQLite) is ``FULL`` (an ack survives power loss) or ``NORMAL``
        (survives ``kill -9`` but a power loss may drop the last commits); see
        schema.configure. PostgreSQL commits are durable as its server is configured.
        """
        if is_postgres_url(url):
            from collector.ledger.postgres import PostgresEngine

            return cls(PostgresEngine.open(url))
        return cls(SqliteEngine.open(url, synchronous))

    @property
    def dialect(self) -> str:
        return self.engine.dialect

    def close(self) -> None:
        if self._accepted is not None:
            self._accepted.close()
        self.engine.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.write() as conn:
            yield conn
        self.writes += 1

    def _read(self, query: Callable[[Connection], T]) -> T:
        return self.engine.read(query)

    # -- for modules that own their tables (notification outbox, action log) ------------

    @contextmanager
    def write_transaction(self) -> Iterator[Connection]:
        """One write transaction (committed on exit, rolled back on error), for modules
        that keep their own SQL (collector/ledger/sql.py) next to their own tables."""
        with self._write() as conn:
            yield conn

    def read(self, query: Callable[[Connection], T]) -> T:
        """Run ``query`` on one read snapshot, for modules that own their tables."""
        return self._read(query)

    # -- the ingest queue's and the applier's writes ------------------------------------

    def record_batch(
        self,
        node: str,
        boot_id: str,
        seq: int,
        received_at: float,
        body: bytes,
        sample_count: int,
    ) -> int | None:
        """Acknowledge a batch and keep its body pending; returns the pending batch id,
        or None when (node, boot_id, seq) was acknowledged before (a duplicate)."""
        record = BatchRecord(node, boot_id, seq, received_at, body, sample_count)
        return self.record_batches([record])[0]

    def record_batches(self, records: Sequence[BatchRecord]) -> list[int | None]:
        """``record_batch`` for several batches in one write to the batch log (one
        fdatasync with FULL): the pending batch id of each, in order, or None for a
        duplicate, including a (node, boot_id, seq) repeated within ``records``. All are
        durable on return, or none is acknowledged."""
        if not records:
            return []
        return self._opened_accepted().record(records)

    def commit(self, write: LedgerWrite, fence: Callable[[Connection], bool] | None = None) -> None:
        """Apply one ``LedgerWrite`` atomically (see its docstring), with the acks
        recorded since the last commit. ``fence`` runs first in the transaction: when it
        answers False (a replica's shard lease was taken over) nothing is written and
        ``LedgerFenced`` is raised."""
        accepted = self._opened_accepted()
        saved = None
        try:
            with self._write() as conn:
                if fence is not None and not fence(conn):
                    raise LedgerFenced("the shard's lease moved to another replica")
                self.engine.prepare(conn, {h for h, _ in (*write.gpu_usage, *write.workload_usage)})
                apply_write(conn, write)
                saved = accepted.save(conn, write.batches_done)
        except BaseException:
            if saved is not None:
                accepted.failed(saved)
            raise
        accepted.committed(saved, write.batches_done)

    def prune(self, now: float, retention_days: int) -> int:
        """Delete hourly rows and closed episodes older than ``retention_days``, resolved
        or dismissed recommendations not updated since, and ack ranges whose newest ack is
        older than ``ACK_RETENTION_SECONDS``; all-time totals stay. Returns the rows
        deleted."""
        with self._write() as conn:
            deleted = self.engine.drop_expired(conn, _day_cutoff(now, retention_days))
            deleted += prune(conn, now, retention_days)
        if self._accepted is not None:  # else its book is read from the pruned table
            self._accepted.prune(now - ACK_RETENTION_SECONDS)
        return deleted

    # -- restart ------------------------------------------------------------------------

    def pending_batches(self) -> list[tuple[int, bytes]]:
        """(id, JSON body) of acknowledged batches not yet fully applied, oldest first;
        a body recorded gzip-compressed comes back decompressed."""
        return [(r.batch_id, r.entry.body) for r in self.pending_records()]

    def pending_records(self) -> list[LoggedBatch]:
        """``pending_batches`` with each batch's identity and arrival as logged."""
        return self._opened_accepted().pending()

    def pending_of_shards(
        self, shards: Sequence[int], known: Sequence[int] = ()
    ) -> list[LoggedBatch]:
        """The pending batches of ``shards`` but those in ``known`` (PostgreSQL only)."""
        return self._sharded().pending(shards, known)

    def pending_shards(self) -> dict[int, int]:
        """Pending batch id -> shard, of every replica's (PostgreSQL only)."""
        return self._sharded().pending_shards()

    def version(self) -> int:
        """Write transactions so far: ledger-wide on PostgreSQL (any replica's), this
        process's on SQLite (``writes``). PostgreSQL's costs a read."""
        shared = getattr(self.engine, "version", None)
        return int(shared()) if shared is not None else self.writes

    def _sharded(self) -> ShardedIntake:
        intake = self._opened_accepted()
        if not hasattr(intake, "pending_shards"):
            raise LedgerError("intake shards: only a PostgreSQL ledger keeps them")
        return intake  # type: ignore[return-value]

    def intake_corrupt_records(self) -> int:
        """Damaged records the batch log skipped when it was opened (0 until it is)."""
        accepted = self._accepted
        return 0 if accepted is None else accepted.corrupt_records

    # -- the write path's health ----------------------------------------------------------

    def quarantine(self, logged: LoggedBatch, json_body: bytes, error: str, now: float) -> None:
        """Set a pending batch aside, never to be applied: copied to the quarantine (raises
        OSError when it cannot be), then marked done by the next commit."""
        self._quarantine.keep(logged, json_body, error, now)
        self._opened_accepted().set_aside(logged.batch_id, now, error)

    def space_problem(self) -> str | None:
        """Whether the ledger's volume has too little free space (files.low_space)."""
        return self.engine.space_problem()

    def set_aside_pending(self) -> bool:
        """Whether quarantined batches wait for a commit to mark them done."""
        return self._accepted is not None and self._accepted.has_set_aside()

    def quarantined(self) -> QuarantineSummary:
        return self._quarantine.summary()

    def intake_backlog(self) -> Backlog:
        """The acknowledged batches not yet applied (none before the log is opened)."""
        accepted = self._accepted
        return accepted.backlog() if accepted is not None else Backlog(0, 0, None)

    def _opened_accepted(self) -> Intake:
        if self._accepted is None:
            with self._accepted_open_lock:
                if self._accepted is None:
                    self._accepted = self.engine.open_intake()
                    self.writes += 1
        return self._accepted

    def cursors(self) -> dict[str, GpuCursor]:
        return self._read(queries.cursors)

    def ping(self) -> None:
        """One cheap read (the schema version); raises LedgerError when the ledger fails."""
        self._read(lambda conn: conn.execute("SELECT MAX(version) FROM schema_version").fetchone())

    # -- queries --------------------------------------------------------------------------

    def gpus(self) -> list[GpuRecord]:
        return self._read(queries.gpus)

    def usage_by_workload(self, start: float, end: float) -> list[tuple[WorkloadRef, Usage]]:
        return self._read(lambda c: queries.usage_by_workload(c, start, end))

    def usage_by_gpu(self, start: float, end: float) -> list[tuple[GpuRecord, Usage]]:
        return self._read(lambda c: queries.usage_by_gpu(c, start, end))

    def usage_by_hour(self, start: float, end: float) -> list[tuple[float, Usage]]:
        return self._read(lambda c: queries.usage_by_hour(c, start, end))

    def usage_by_group(self, start: float, end: float, group: Group) -> list[tuple[str, Usage]]:
        return self._read(lambda c: queries.usage_by_group(c, start, end, group))

    def usage_totals_by_workload(self) -> list[tuple[WorkloadRef, Usage]]:
        """All-time totals (never pruned): monotonic, for *_total counters."""
        return self._read(queries.usage_totals_by_workload)

    def usage_totals_by_gpu(self) -> list[tuple[GpuRecord, Usage]]:
        return self._read(queries.usage_totals_by_gpu)

    def idle_episodes(
        self,
        start: float,
        end: float,
        gpu_uuid: str | None = None,
        workload_key: str | None = None,
        include_open: bool = False,
    ) -> list[IdleEpisode]:
        """Closed episodes overlapping ``[start, end)``; ``include_open`` adds the ones
        open at each GPU's cursor (the live fleet knows fresher ones)."""
        return self._read(
            lambda c: queries.idle_episodes(c, start, end, gpu_uuid, workload_key, include_open)
        )

    def workload_profiles(
        self, now: float, seen_within_seconds: float = 24 * 3600.0
    ) -> list[WorkloadProfile]:
        """Right-sizing profiles of workloads seen within ``seen_within_seconds`` of now."""
        return self._read(lambda c: queries.workload_profiles(c, now, seen_within_seconds))

    def model_usage(self, start: float, end: float) -> list[ModelUsage]:
        return self._read(lambda c: queries.model_usage(c, start, end))

    def model_hours(self, start: float, end: float) -> list[ModelHour]:
        """Per model, node and hour: the reserved baseline's allocation curves."""
        return self._read(lambda c: queries.model_hours(c, start, end))

    def workload_last_seen(self) -> dict[str, float]:
        """Workload key -> when it last held a GPU (event time; survives restarts)."""
        return self._read(queries.workload_last_seen)

    def workload_models(self) -> dict[str, str]:
        """Workload key -> the GPU model it was last seen on (survives restarts)."""
        return self._read(queries.workload_models)

    # -- recommendations ----------------------------------------------------------------

    def upsert_recommendations(self, recommendations: Sequence[Recommendation]) -> None:
        with self._write() as conn:
            recs.upsert(conn, recommendations)

    def recommendations(
        self, statuses: Collection[RecommendationStatus] | None = None
    ) -> list[Recommendation]:
        return self._read(lambda c: recs.select(c, statuses))

    def get_recommendation(self, rec_id: str) -> Recommendation | None:
        return self._read(lambda c: recs.get(c, rec_id))

    def dismiss_recommendation(
        self, rec_id: str, now: float, by: str = ""
    ) -> Recommendation | None:
        with self._write() as conn:
            return recs.dismiss(conn, rec_id, now, by)

    def restore_recommendation(self, rec_id: str, now: float) -> Recommendation | None:
        with self._write() as conn:
            return recs.restore(conn, rec_id, now)


class LedgerFenced(LedgerError):
    """A commit refused by its fence: this replica no longer owns what it applied."""


def _day_cutoff(now: float, retention_days: int) -> float:
    """The UTC day before which ``prune`` deletes rollup rows (writes.prune)."""
    cutoff = now - retention_days * DAY_SECONDS
    return cutoff - cutoff % DAY_SECONDS
