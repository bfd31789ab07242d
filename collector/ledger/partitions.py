"""The time partitions of PostgreSQL's rollup tables (pg_schema.PARTITIONED): one per UTC day
for the hourly tables, one per UTC month for the daily one.

A row can only go into a partition that exists, so each commit first creates those its
hours fall into, and the next one ahead (``ensure``: a ``CREATE TABLE .. PARTITION OF`` in
the commit's transaction, rolled back with it). Retention drops whole partitions that end
before its cutoff (``drop_before``); writes.prune deletes what is left of a partial one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import psycopg

from collector.ledger.pg_schema import PARTITIONED
from collector.records import DAY_SECONDS

#: the transaction-scoped advisory lock a commit creating partitions takes ("gpfpart")
PARTITION_LOCK = 0x67706670617274
#: table -> "day" or "month"
_SPAN = {"gpu_usage_hourly": "day", "workload_usage_hourly": "day", "workload_usage_daily": "month"}


def span_of(table: str, at: float) -> tuple[float, float, str]:
    """The partition of ``table`` that holds time ``at``: [start, end) and its name."""
    day = at - at % DAY_SECONDS
    if _SPAN[table] == "day":
        stamp = datetime.fromtimestamp(day, UTC).strftime("%Y%m%d")
        return day, day + DAY_SECONDS, f"{table}_p{stamp}"
    first = datetime.fromtimestamp(day, UTC).replace(day=1)
    following = first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)
    return first.timestamp(), following.timestamp(), f"{table}_p{first:%Y%m}"


class Partitions:
    """The partitions known to exist (read from the catalogue on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: set[str] | None = None

    def forget(self) -> None:
        """A transaction that may have created partitions was rolled back."""
        with self._lock:
            self._known = None

    def ensure(self, conn: psycopg.Connection[Any], hours: Iterable[float]) -> None:
        """Create the partitions that rows at ``hours`` need, and each one's successor."""
        hours = set(hours)
        if not hours:
            return
        with self._lock:
            known = self._known if self._known is not None else _existing(conn)
            self._known = known
            needed = {
                span[2]: (table, span)
                for table in PARTITIONED
                for hour in hours
                for first in (span_of(table, hour),)
                for span in (first, span_of(table, first[1]))
            }
            missing = [name for name in needed if name not in known]
            if not missing:
                return
            # replicas creating the same day at once: CREATE TABLE IF NOT EXISTS does not
            # guard that race (the second fails with DuplicateTable), so creating waits for
            # any other commit creating partitions, then reads what that one made
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (PARTITION_LOCK,))
            known |= _existing(conn)
            for name in missing:
                if name not in known:
                    table, (start, end, _) = needed[name]
                    _create(conn, table, name, start, end)
                    known.add(name)

    def drop_before(self, conn: psycopg.Connection[Any], day_cutoff: float) -> int:
        """Drop the partitions that end at or before ``day_cutoff``; the rows they held."""
        dropped = 0
        with self._lock:
            rows = conn.execute(_CHILDREN, (list(PARTITIONED),)).fetchall()
            for _parent, child, upper in rows:
                if upper is not None and float(upper) <= day_cutoff:
                    count = conn.execute(f'SELECT COUNT(*) FROM "{child}"').fetchone()
                    conn.execute(f'DROP TABLE "{child}"')
                    dropped += int(count[0]) if count else 0
                    if self._known is not None:
                        self._known.discard(child)
        return dropped


#: each partition of the partitioned tables, with its upper bound (a literal number)
_CHILDREN = """
SELECT p.relname, c.relname,
       substring(pg_get_expr(c.relpartbound, c.oid) from 'TO \\(''?([0-9.e+-]+)''?\\)')
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname = ANY(%s)
"""


def _existing(conn: psycopg.Connection[Any]) -> set[str]:
    return {row[1] for row in conn.execute(_CHILDREN, (list(PARTITIONED),)).fetchall()}


def _create(conn: psycopg.Connection[Any], table: str, name: str, start: float, end: float) -> None:
    conn.execute(
        f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF {table} '
        f"FOR VALUES FROM ({start!r}) TO ({end!r})"
    )
