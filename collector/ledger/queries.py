"""The ledger's read queries: pure reads over one connection, run inside a read snapshot.

Time ranges are ``[start, end)`` over ``hour_start``: an hourly row counts when its hour
*starts* in the range, so ranges should be whole hours (a partial hour is all or nothing):
the read paths widen theirs with ``collector.usage_report.ledger_period``.
"""

from __future__ import annotations

from typing import Any, Literal

from collector.ledger.histogram import MEMORY_BUCKETS, SM_ACTIVITY_BUCKETS, histogram_quantile
from collector.ledger.records import GpuCursor, GpuRecord
from collector.ledger.schema import USAGE_COLUMNS
from collector.ledger.sql import Connection
from collector.records import (
    DAY_SECONDS,
    IdleEpisode,
    ModelHour,
    ModelUsage,
    Usage,
    WorkloadProfile,
    WorkloadRef,
)

Group = Literal["namespace", "team", "user", "owner", "queue", "model", "node", "account"]

_SUMS = ", ".join(f"SUM(h.{c})" for c in USAGE_COLUMNS)
_TOTALS = ", ".join(f"t.{c}" for c in USAGE_COLUMNS)
_N = len(USAGE_COLUMNS)
_GPU_COLS = (
    "g.uuid, g.node, g.model, g.name, g.gpu_index, g.first_seen, g.last_seen, g.info_json, "
    "g.mig_parent_uuid, g.mig_profile"
)
_GPU_N = 10
_WORKLOAD_COLS = (
    'w.key, w.kind, w.name, w.namespace, w.team, w."user", w.owner, w.queue, w.priority_class'
)
_WORKLOAD_N = 9
#: group -> (rollup table, registry join, grouping column)
_GROUPS: dict[str, tuple[str, str, str]] = {
    "namespace": ("workload_usage_hourly", "workloads w ON w.key = h.workload_key", "w.namespace"),
    "team": ("workload_usage_hourly", "workloads w ON w.key = h.workload_key", "w.team"),
    "user": ("workload_usage_hourly", "workloads w ON w.key = h.workload_key", "w.user"),
    "owner": ("workload_usage_hourly", "workloads w ON w.key = h.workload_key", "w.owner"),
    "queue": ("workload_usage_hourly", "workloads w ON w.key = h.workload_key", "w.queue"),
    "model": ("gpu_usage_hourly", "gpus w ON w.uuid = h.gpu_uuid", "w.model"),
    "node": ("gpu_usage_hourly", "gpus w ON w.uuid = h.gpu_uuid", "w.node"),
    # a Slurm job's namespace is its account (its partition when it has none: workload_ref)
    "account": (
        "workload_usage_hourly",
        "workloads w ON w.key = h.workload_key",
        "CASE WHEN w.kind = 'slurm_job' THEN w.namespace ELSE '' END",
    ),
}


def _usage(values: tuple[Any, ...]) -> Usage:
    return Usage(*values)  # REAL columns and SUMs over non-empty groups: floats, never NULL


def _gpu(row: tuple[Any, ...]) -> GpuRecord:
    return GpuRecord(*row[:_GPU_N])


def _workload(row: tuple[Any, ...]) -> WorkloadRef:
    return WorkloadRef(*row[:_WORKLOAD_N])


_WORKLOAD_USAGE = ", ".join(("workload_key", *USAGE_COLUMNS))


def usage_by_workload(
    conn: Connection, start: float, end: float
) -> list[tuple[WorkloadRef, Usage]]:
    """The whole UTC days in [start, end) from the daily rollups (a row a day), the hours
    before the first and after the last from the hourly ones: the same sums as the hours
    alone (V5 keeps each day the sum of its hours)."""
    first_day = start + (-start % DAY_SECONDS)
    last_day = end - end % DAY_SECONDS
    if first_day >= last_day:  # no whole day in the range
        first_day = last_day = end
    rows = conn.execute(
        f"SELECT {_WORKLOAD_COLS}, {_SUMS} FROM ("
        f"SELECT {_WORKLOAD_USAGE} FROM workload_usage_hourly "
        "WHERE hour_start >= ? AND hour_start < ? "
        f"UNION ALL SELECT {_WORKLOAD_USAGE} FROM workload_usage_daily "
        "WHERE day_start >= ? AND day_start < ? "
        f"UNION ALL SELECT {_WORKLOAD_USAGE} FROM workload_usage_hourly "
        "WHERE hour_start >= ? AND hour_start < ?"
        ") h JOIN workloads w ON w.key = h.workload_key GROUP BY w.key ORDER BY w.key",
        (start, first_day, first_day, last_day, last_day, end),
    )
    return [(_workload(r), _usage(r[_WORKLOAD_N:])) for r in rows]


def usage_by_gpu(conn: Connection, start: float, end: float) -> list[tuple[GpuRecord, Usage]]:
    rows = conn.execute(
        f"SELECT {_GPU_COLS}, {_SUMS} FROM gpu_usage_hourly h JOIN gpus g ON g.uuid = h.gpu_uuid "
        "WHERE h.hour_start >= ? AND h.hour_start < ? GROUP BY g.uuid ORDER BY g.node, g.uuid",
        (start, end),
    )
    return [(_gpu(r), _usage(r[_GPU_N:])) for r in rows]


def usage_by_hour(conn: Connection, start: float, end: float) -> list[tuple[float, Usage]]:
    """The fleet's usage per hour of ``[start, end)`` (hours with rows only), oldest first."""
    rows = conn.execute(
        f"SELECT h.hour_start, {_SUMS} FROM gpu_usage_hourly h "
        "WHERE h.hour_start >= ? AND h.hour_start < ? GROUP BY h.hour_start ORDER BY h.hour_start",
        (start, end),
    )
    return [(float(r[0]), _usage(r[1:])) for r in rows]


def usage_by_group(
    conn: Connection, start: float, end: float, group: Group
) -> list[tuple[str, Usage]]:
    """namespace/team sum workload rollups (usage nobody held is in no namespace);
    model/node sum GPU rollups."""
    if group not in _GROUPS:
        raise ValueError(f"group: must be one of {sorted(_GROUPS)}, got {group!r}")
    table, join, column = _GROUPS[group]
    rows = conn.execute(
        f"SELECT {column}, {_SUMS} FROM {table} h JOIN {join} "
        f"WHERE h.hour_start >= ? AND h.hour_start < ? GROUP BY {column} ORDER BY {column}",
        (start, end),
    )
    return [(str(r[0]), _usage(r[1:])) for r in rows]


def usage_totals_by_workload(conn: Connection) -> list[tuple[WorkloadRef, Usage]]:
    rows = conn.execute(
        f"SELECT {_WORKLOAD_COLS}, {_TOTALS} FROM workload_usage_total t "
        "JOIN workloads w ON w.key = t.workload_key ORDER BY w.key"
    )
    return [(_workload(r), _usage(r[_WORKLOAD_N:])) for r in rows]


def usage_totals_by_gpu(conn: Connection) -> list[tuple[GpuRecord, Usage]]:
    rows = conn.execute(
        f"SELECT {_GPU_COLS}, {_TOTALS} FROM gpu_usage_total t "
        "JOIN gpus g ON g.uuid = t.gpu_uuid ORDER BY g.node, g.uuid"
    )
    return [(_gpu(r), _usage(r[_GPU_N:])) for r in rows]


def gpus(conn: Connection) -> list[GpuRecord]:
    return [
        _gpu(r) for r in conn.execute(f"SELECT {_GPU_COLS} FROM gpus g ORDER BY g.node, g.uuid")
    ]


def cursors(conn: Connection) -> dict[str, GpuCursor]:
    rows = conn.execute("SELECT * FROM cursors")
    return {r[0]: GpuCursor(*r) for r in rows}


def idle_episodes(
    conn: Connection,
    start: float,
    end: float,
    gpu_uuid: str | None,
    workload_key: str | None,
    include_open: bool,
) -> list[IdleEpisode]:
    """Closed episodes overlapping ``[start, end)`` and, with ``include_open``, those
    open at the GPU's cursor (``end`` None; as of the last commit), sorted by start."""
    rows = conn.execute(
        "SELECT gpu_uuid, node, start_time, end_time, workload_key FROM idle_episodes "
        "WHERE start_time < :end AND end_time > :start "
        "AND (CAST(:gpu AS TEXT) IS NULL OR gpu_uuid = :gpu) "
        "AND (CAST(:wl AS TEXT) IS NULL OR workload_key = :wl) "
        "UNION ALL "
        "SELECT c.gpu_uuid, g.node, c.open_episode_start, NULL, c.open_episode_workload "
        "FROM cursors c JOIN gpus g ON g.uuid = c.gpu_uuid "
        "WHERE :open AND c.open_episode_start IS NOT NULL AND c.open_episode_start < :end "
        "AND (CAST(:gpu AS TEXT) IS NULL OR c.gpu_uuid = :gpu) "
        "AND (CAST(:wl AS TEXT) IS NULL OR c.open_episode_workload = :wl) "
        "ORDER BY 3, 1",
        {"start": start, "end": end, "gpu": gpu_uuid, "wl": workload_key, "open": include_open},
    )
    return [IdleEpisode(*r) for r in rows]


def workload_profiles(
    conn: Connection, now: float, seen_within_seconds: float
) -> list[WorkloadProfile]:
    stats = conn.execute(
        f"SELECT {_WORKLOAD_COLS}, s.gpu_model, s.gpu_count, s.observed_seconds, "
        "s.memory_peak_bytes, s.sm_activity_peak FROM workload_stats s "
        "JOIN workloads w ON w.key = s.workload_key WHERE s.last_seen >= ? ORDER BY w.key",
        (now - seen_within_seconds,),
    ).fetchall()
    hists: dict[tuple[str, str], dict[int, float]] = {}
    for key, metric, bucket, seconds in conn.execute(
        "SELECT h.workload_key, h.metric, h.bucket, h.seconds FROM workload_histograms h "
        "JOIN workload_stats s ON s.workload_key = h.workload_key WHERE s.last_seen >= ?",
        (now - seen_within_seconds,),
    ):
        hists.setdefault((key, metric), {})[bucket] = seconds
    return [_profile(r, hists) for r in stats]


def _profile(
    row: tuple[Any, ...], hists: dict[tuple[str, str], dict[int, float]]
) -> WorkloadProfile:
    workload = _workload(row)
    model, count, observed, memory_peak, sm_peak = row[_WORKLOAD_N:]
    memory = hists.get((workload.key, "memory"), {})
    sm = hists.get((workload.key, "sm_activity"), {})
    return WorkloadProfile(
        workload=workload,
        gpu_model=model,
        gpu_count=count,
        observed_seconds=observed,
        memory_p95_bytes=round(histogram_quantile(memory, 0.95, MEMORY_BUCKETS, memory_peak)),
        memory_peak_bytes=memory_peak,
        sm_activity_peak=sm_peak,
        sm_activity_p95=histogram_quantile(sm, 0.95, SM_ACTIVITY_BUCKETS, sm_peak),
    )


def model_usage(conn: Connection, start: float, end: float) -> list[ModelUsage]:
    """Per GPU model and node over ``[start, end)``, physical GPUs only (MIG instances
    excluded); per node because a node's price-book override may set its own plan.

    observed = active + idle seconds (unknown excluded); allocated = active +
    allocated-idle seconds (an active GPU counts as in use, held or not)."""
    rows = conn.execute(
        "SELECT g.model, g.node, COUNT(DISTINCT g.uuid), "
        "SUM(h.active_seconds + h.idle_seconds), "
        "SUM(h.active_seconds + h.allocated_idle_seconds), SUM(h.active_seconds) "
        "FROM gpu_usage_hourly h JOIN gpus g ON g.uuid = h.gpu_uuid "
        "WHERE h.hour_start >= ? AND h.hour_start < ? AND g.mig_parent_uuid IS NULL "
        "GROUP BY g.model, g.node ORDER BY g.model, g.node",
        (start, end),
    )
    return [ModelUsage(*r) for r in rows]


def model_hours(conn: Connection, start: float, end: float) -> list[ModelHour]:
    """Per GPU model, node and hour over ``[start, end)``, physical GPUs only, as
    ``model_usage`` counts them: the allocation curve of the reserved baseline."""
    rows = conn.execute(
        "SELECT g.model, g.node, h.hour_start, "
        "SUM(h.active_seconds + h.allocated_idle_seconds), SUM(h.active_seconds) "
        "FROM gpu_usage_hourly h JOIN gpus g ON g.uuid = h.gpu_uuid "
        "WHERE h.hour_start >= ? AND h.hour_start < ? AND g.mig_parent_uuid IS NULL "
        "GROUP BY g.model, g.node, h.hour_start ORDER BY g.model, g.node, h.hour_start",
        (start, end),
    )
    return [ModelHour(*r) for r in rows]


def workload_last_seen(conn: Connection) -> dict[str, float]:
    """Workload key -> when it last held a GPU (event time)."""
    rows = conn.execute("SELECT workload_key, last_seen FROM workload_stats")
    return {str(key): float(seen) for key, seen in rows}


def workload_models(conn: Connection) -> dict[str, str]:
    """Workload key -> the GPU model the ledger last saw it on."""
    rows = conn.execute("SELECT workload_key, gpu_model FROM workload_stats")
    return {str(key): str(model) for key, model in rows if model}
