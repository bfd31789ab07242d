"""One way of applying a PostgreSQL ledger at a time: a single collector or replicas.

A collector with ``cluster.enabled: false`` applies every batch itself, so a second one on
the same ledger would count everything twice, and replicas beside it would apply what it
applies. Each collector therefore holds a session advisory lock on a connection of its
own for its whole life: the single collector exclusively, replicas shared (any number of
them together). Whoever cannot take it refuses to start and names who holds it (host and
pid, from the holder's ``application_name``). The server releases the lock when the
holder's session ends, a ``kill -9`` included (its socket closes), so a restart is not
blocked by the dead process. Needs a session, not a pooler in transaction mode.

Why a lock and not ``cluster.enabled`` by default: one restarted collector then applies
at once, where a replica waits up to ``cluster.lease_seconds`` for its dead predecessor's
leases (each start has a new replica id), and one collector needs no leases at all.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import psycopg

from collector.ledger.postgres import redacted
from collector.ledger.records import LedgerError

#: the advisory lock's two keys: "gpuf" and 1 (pg_locks: classid, objid)
LOCK_CLASS, LOCK_ID = 0x67707566, 1
_HOLDERS = (
    "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::bigint::oid "
    "AND l.objid = %s::bigint::oid AND l.database = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) AND l.pid <> pg_backend_pid()"
)
#: the holder's application_name: this prefix, then "<host>, pid <pid>"
_PREFIX = "gpufleet:"
_SINGLE_HINT = "set cluster.enabled: true to run replicas"
_REPLICA_HINT = "stop it, or set cluster.enabled: true on it too, to run replicas"


class LedgerGuard:
    """The held lock; ``close`` (or the process's end) releases it."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()


def take(url: str, replica: bool) -> LedgerGuard:
    """Take the ledger's lock, shared for a replica, else exclusive; LedgerError naming
    the holder when another way of applying it runs."""
    name = f"{_PREFIX}{socket.gethostname()[:40]}, pid {os.getpid()}"
    try:
        conn = psycopg.connect(url, autocommit=True, application_name=name, connect_timeout=10)
    except psycopg.Error as err:
        raise LedgerError(f"ledger {redacted(url)}: cannot connect for its lock: {err}") from err
    lock = "pg_try_advisory_lock_shared" if replica else "pg_try_advisory_lock"
    row = conn.execute(f"SELECT {lock}(%s, %s)", (LOCK_CLASS, LOCK_ID)).fetchone()
    if row is not None and row[0]:
        return LedgerGuard(conn)
    try:
        holders = _holders(conn)
    finally:
        conn.close()
    if replica:
        raise LedgerError(
            f"a collector with cluster.enabled: false ({holders}) applies ledger "
            f"{redacted(url)}; {_REPLICA_HINT}"
        )
    raise LedgerError(
        f"another collector ({holders}) applies ledger {redacted(url)}; {_SINGLE_HINT}"
    )


def _holders(conn: psycopg.Connection[Any]) -> str:
    rows = conn.execute(_HOLDERS, (LOCK_CLASS, LOCK_ID)).fetchall()
    names = [(name or "").removeprefix(_PREFIX) or f"server pid {pid}" for name, pid in rows]
    return ", ".join(names) or "it just ended: start again"
