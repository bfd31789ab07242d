"""Copying a ledger into an empty one of the other backend (``gpufleet ledger migrate``):
every table as it is, and the pending intake (acknowledged batches not yet applied, from
SQLite's batch log) into PostgreSQL's ``intake_batches``, so the collector started on the
target replays them as it would have on the source.

All in one transaction of the target: a copy that fails leaves it empty, ready for another
try; a target that holds data already is refused (``LedgerError`` saying what it holds).
The source's batch log is opened, so a collector still running on it is refused too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collector.ledger.batch_log import LoggedBatch
from collector.ledger.records import LedgerError
from collector.ledger.sql import Connection
from collector.ledger.store import Ledger

#: the tables copied, registries first (the others reference them); schema_version is the
#: target's own, and intake_done/pending_batches are the SQLite batch log's bookkeeping
TABLES = (
    "gpus", "workloads", "gpu_usage_hourly", "workload_usage_hourly", "workload_usage_daily",
    "gpu_usage_total", "workload_usage_total", "idle_episodes", "cursors", "ack_ranges",
    "workload_stats", "workload_histograms", "recommendations", "notify_outbox",
    "notify_state", "action_log", "action_workloads", "answers", "reports_sent",
)  # fmt: skip
#: tables whose ``id`` the target numbers from a sequence, moved past the copied ids
_NUMBERED = ("notify_outbox", "action_log")
_CHUNK_ROWS = 5000


@dataclass(frozen=True)
class CopyReport:
    """Rows copied per table, and the pending batches carried over."""

    rows: dict[str, int]
    pending_batches: int


def copy_ledger(source: Ledger, target: Ledger) -> CopyReport:
    refuse_non_empty(target)
    pending = source.pending_records()
    rows: dict[str, int] = {}
    with target.write_transaction() as conn:
        hours = source.read(lambda c: _hours(c))
        target.engine.prepare(conn, hours)
        for table in TABLES:
            rows[table] = _copy_table(source, conn, table)
        _copy_pending(conn, pending)
        if target.dialect == "postgresql":
            for table in _NUMBERED:
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"GREATEST(COALESCE(MAX(id), 0), 1), MAX(id) IS NOT NULL) FROM {table}"
                )
    return CopyReport(rows, len(pending))


def refuse_non_empty(target: Ledger) -> None:
    counts = target.read(
        lambda c: {t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    )
    if target.dialect == "postgresql":
        counts["intake_batches"] = target.read(
            lambda c: c.execute("SELECT COUNT(*) FROM intake_batches").fetchone()[0]
        )
    held = {table: n for table, n in counts.items() if n}
    if held:
        listed = ", ".join(f"{n} rows in {t}" for t, n in sorted(held.items()))
        raise LedgerError(
            f"ledger migrate: the target ledger is not empty ({listed}); migrate into a new, "
            "empty database (a ledger is copied once), or drop this one's tables first"
        )


def _hours(conn: Connection) -> set[float]:
    sql = (
        "SELECT hour_start FROM gpu_usage_hourly UNION SELECT hour_start FROM "
        "workload_usage_hourly UNION SELECT day_start FROM workload_usage_daily"
    )
    return {float(r[0]) for r in conn.execute(sql)}


def _copy_table(source: Ledger, conn: Connection, table: str) -> int:
    found: list[tuple[Any, ...]] = source.read(
        lambda c: [tuple(r) for r in c.execute(f"SELECT * FROM {table}")]
    )
    if not found:
        return 0
    marks = ", ".join("?" for _ in found[0])
    for i in range(0, len(found), _CHUNK_ROWS):
        conn.executemany(f"INSERT INTO {table} VALUES ({marks})", found[i : i + _CHUNK_ROWS])
    return len(found)


def _copy_pending(conn: Connection, pending: Sequence[LoggedBatch]) -> None:
    """Into ``intake_batches``, oldest first. A batch adopted from a schema-3 ledger has no
    identity (node ""); each gets a seq of its own below 0, so they stay distinct."""
    rows = []
    for n, logged in enumerate(pending, start=1):
        e = logged.entry
        seq = e.seq if e.node else -n
        rows.append((e.node, e.boot_id, seq, e.received_at, e.sample_count, e.body))
    conn.executemany(
        "INSERT INTO intake_batches (node, boot_id, seq, received_at, sample_count, body) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
