"""The ledger's write statements. Each function runs inside the caller's transaction."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from collector.ledger.records import LedgerWrite
from collector.ledger.schema import USAGE_COLUMNS
from collector.ledger.sql import Connection
from collector.records import DAY_SECONDS, Usage

#: acks are kept this long; the agent drops spooled batches after 7 days
#: (agent.config spool_max_age_seconds), so an older batch can never come back
ACK_RETENTION_SECONDS = 14 * 24 * 3600.0

_usage_values = operator.attrgetter(*USAGE_COLUMNS)
_COLS = ", ".join(USAGE_COLUMNS)
_MARKS = ", ".join("?" for _ in USAGE_COLUMNS)


def _greatest(table: str, column: str) -> str:
    """The larger of the stored and the new value (portable: no scalar MAX in PostgreSQL,
    no GREATEST in SQLite)."""
    return (
        f"CASE WHEN {table}.{column} >= excluded.{column} THEN {table}.{column} "
        f"ELSE excluded.{column} END"
    )


def _upsert_usage(table: str, keys: tuple[str, ...]) -> str:
    key_cols = ", ".join(keys)
    key_marks = ", ".join("?" for _ in keys)
    add = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in USAGE_COLUMNS)
    return (
        f"INSERT INTO {table} ({key_cols}, {_COLS}) VALUES ({key_marks}, {_MARKS}) "
        f"ON CONFLICT ({key_cols}) DO UPDATE SET {add}"
    )


_GPU_HOURLY = _upsert_usage("gpu_usage_hourly", ("hour_start", "gpu_uuid"))
_GPU_TOTAL = _upsert_usage("gpu_usage_total", ("gpu_uuid",))
_WORKLOAD_HOURLY = _upsert_usage("workload_usage_hourly", ("hour_start", "workload_key"))
_WORKLOAD_TOTAL = _upsert_usage("workload_usage_total", ("workload_key",))
_WORKLOAD_DAILY = _upsert_usage("workload_usage_daily", ("day_start", "workload_key"))


def apply_write(conn: Connection, write: LedgerWrite) -> None:
    """Registries first (the rows below reference them), then deltas, cursors, cleanup."""
    _upsert_registries(conn, write)
    _add_usage(conn, _GPU_HOURLY, _GPU_TOTAL, write.gpu_usage.items())
    rows = _add_usage(conn, _WORKLOAD_HOURLY, _WORKLOAD_TOTAL, write.workload_usage.items())
    conn.executemany(_WORKLOAD_DAILY, [(hour - hour % DAY_SECONDS, *rest) for hour, *rest in rows])
    _upsert_stats(conn, write)
    conn.executemany(
        "INSERT INTO idle_episodes VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (gpu_uuid, start_time) DO UPDATE SET node = excluded.node, "
        "end_time = excluded.end_time, workload_key = excluded.workload_key",
        [
            (e.gpu_uuid, e.node, e.start, e.end, e.workload_key)
            for e in write.episodes_closed
            if e.end is not None
        ],
    )
    conn.executemany(
        # an upsert rewrites the row in place (REPLACE deletes and inserts it: ~25 % slower)
        "INSERT INTO cursors VALUES (?, ?, ?, ?, ?) ON CONFLICT (gpu_uuid) DO UPDATE SET "
        "applied_until = excluded.applied_until, last_sample = excluded.last_sample, "
        "open_episode_start = excluded.open_episode_start, "
        "open_episode_workload = excluded.open_episode_workload",
        [
            (
                c.gpu_uuid,
                c.applied_until,
                c.last_sample,
                c.open_episode_start,
                c.open_episode_workload,
            )
            for c in write.cursors.values()
        ],
    )


def _upsert_registries(conn: Connection, write: LedgerWrite) -> None:
    conn.executemany(
        "INSERT INTO gpus VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (uuid) DO UPDATE SET "
        "node = excluded.node, model = excluded.model, name = excluded.name, "
        "gpu_index = excluded.gpu_index, info_json = excluded.info_json, "
        "mig_parent_uuid = excluded.mig_parent_uuid, mig_profile = excluded.mig_profile, "
        "first_seen = CASE WHEN gpus.first_seen <= excluded.first_seen "
        "THEN gpus.first_seen ELSE excluded.first_seen END, "
        f"last_seen = {_greatest('gpus', 'last_seen')}",
        [
            (
                g.uuid,
                g.node,
                g.model,
                g.name,
                g.index,
                g.info_json,
                g.mig_parent_uuid,
                g.mig_profile,
                g.first_seen,
                g.last_seen,
            )
            for g in write.gpus.values()
        ],
    )
    conn.executemany(
        'INSERT INTO workloads (key, kind, name, namespace, team, "user", owner, queue, '
        "priority_class) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
        "kind = excluded.kind, name = excluded.name, namespace = excluded.namespace, "
        'team = excluded.team, "user" = excluded."user", owner = excluded.owner, '
        "queue = excluded.queue, priority_class = excluded.priority_class",
        [
            (w.key, w.kind, w.name, w.namespace, w.team, w.user, w.owner, w.queue, w.priority_class)
            for w in write.workloads.values()
        ],
    )


def _add_usage(
    conn: Connection,
    hourly_sql: str,
    total_sql: str,
    deltas: Iterable[tuple[tuple[float, str], Usage]],
) -> list[tuple[Any, ...]]:
    """The deltas added to their hours and totals; returns the rows (hour, key, *usage)."""
    rows = [(hour, key, *_usage_values(usage)) for (hour, key), usage in deltas]
    conn.executemany(hourly_sql, rows)
    conn.executemany(total_sql, [row[1:] for row in rows])
    return rows


def _upsert_stats(conn: Connection, write: LedgerWrite) -> None:
    conn.executemany(
        "INSERT INTO workload_stats VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (workload_key) DO UPDATE SET "
        "observed_seconds = workload_stats.observed_seconds + excluded.observed_seconds, "
        f"memory_peak_bytes = {_greatest('workload_stats', 'memory_peak_bytes')}, "
        f"sm_activity_peak = {_greatest('workload_stats', 'sm_activity_peak')}, "
        "gpu_model = CASE WHEN excluded.gpu_model = '' THEN workload_stats.gpu_model "
        "ELSE excluded.gpu_model END, "
        "gpu_count = CASE WHEN excluded.gpu_count = 0 THEN workload_stats.gpu_count "
        "ELSE excluded.gpu_count END, "
        f"last_seen = {_greatest('workload_stats', 'last_seen')}",
        [
            (
                key,
                s.observed_seconds,
                s.memory_peak_bytes,
                s.sm_activity_peak,
                s.gpu_model,
                s.gpu_count,
                s.last_seen,
            )
            for key, s in write.workload_stats.items()
        ],
    )
    rows = [
        (key, metric, bucket, seconds)
        for key, s in write.workload_stats.items()
        for metric, hist in (("memory", s.memory_seconds), ("sm_activity", s.sm_activity_seconds))
        for bucket, seconds in hist.items()
    ]
    conn.executemany(
        "INSERT INTO workload_histograms VALUES (?, ?, ?, ?) "
        "ON CONFLICT (workload_key, metric, bucket) DO UPDATE SET "
        "seconds = workload_histograms.seconds + excluded.seconds",
        rows,
    )


def prune(conn: Connection, now: float, retention_days: int) -> int:
    """Delete rows past retention; all-time totals, stats and pending batches stay."""
    cutoff = now - retention_days * 24 * 3600.0
    # a UTC day's rows go once all of the day is past the cutoff, its hours with its daily
    # row, so a range reads the same from either
    day = cutoff - cutoff % DAY_SECONDS
    statements = (
        ("DELETE FROM gpu_usage_hourly WHERE hour_start < ?", (day,)),
        ("DELETE FROM workload_usage_hourly WHERE hour_start < ?", (day,)),
        ("DELETE FROM workload_usage_daily WHERE day_start < ?", (day,)),
        ("DELETE FROM idle_episodes WHERE end_time < ?", (cutoff,)),
        (
            "DELETE FROM recommendations WHERE status IN ('resolved', 'dismissed') "
            "AND updated_at < ?",
            (cutoff,),
        ),
        # a range goes once its newest ack is that old (no batch of it can come back)
        ("DELETE FROM ack_ranges WHERE received_at < ?", (now - ACK_RETENTION_SECONDS,)),
    )
    return sum(conn.execute(sql, args).rowcount for sql, args in statements)
