"""Every auto-release decision and action, in the ledger (schema v2, table action_log).

A stage (``warn:0.5``, ``act``, ``skip:stale`` ...) is recorded at most once per workload
and idle episode (unique key), before it is carried out: a crash after recording and
before acting leaves the action undone rather than done twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from collector.ledger.store import Ledger


@dataclass(frozen=True)
class LogEntry:
    at: float
    workload_key: str
    episode_start: float
    stage: str
    decision: str
    mode: str
    dry_run: bool
    detail: str


class ActionLog:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def touch(self, keys: Iterable[str], now: float) -> dict[str, float]:
        """Note that ``keys`` are in the fleet now; returns each one's first-seen time."""
        keys = sorted(set(keys))
        with self.ledger.write_transaction() as conn:
            conn.executemany(
                "INSERT INTO action_workloads (workload_key, first_seen, last_seen) "
                "VALUES (?, ?, ?) ON CONFLICT (workload_key) DO UPDATE SET last_seen = ?",
                [(k, now, now, now) for k in keys],
            )
            rows = conn.execute("SELECT workload_key, first_seen FROM action_workloads")
            return {k: float(t) for k, t in rows if k in keys}

    def record(self, entry: LogEntry) -> bool:
        """Store ``entry``; False when its stage was already recorded for the episode."""
        with self.ledger.write_transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO action_log (at, workload_key, episode_start, stage, "
                "decision, mode, dry_run, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (
                    entry.at,
                    entry.workload_key,
                    entry.episode_start,
                    entry.stage,
                    entry.decision,
                    entry.mode,
                    int(entry.dry_run),
                    entry.detail,
                ),
            )
            return cursor.rowcount == 1

    def update(self, entry: LogEntry) -> None:
        """Set the decision and detail of a recorded stage (the outcome of an action)."""
        with self.ledger.write_transaction() as conn:
            conn.execute(
                "UPDATE action_log SET decision = ?, detail = ? "
                "WHERE workload_key = ? AND episode_start = ? AND stage = ?",
                (
                    entry.decision,
                    entry.detail,
                    entry.workload_key,
                    entry.episode_start,
                    entry.stage,
                ),
            )

    def stages(self, workload_key: str, episode_start: float) -> dict[str, float]:
        """Stage -> when it was recorded, for one workload's idle episode."""
        rows = self.ledger.read(
            lambda c: c.execute(
                "SELECT stage, at FROM action_log WHERE workload_key = ? AND episode_start = ?",
                (workload_key, episode_start),
            ).fetchall()
        )
        return {r[0]: float(r[1]) for r in rows}

    def entries(self) -> list[LogEntry]:
        rows = self.ledger.read(
            lambda c: c.execute(
                "SELECT at, workload_key, episode_start, stage, decision, mode, dry_run, detail "
                "FROM action_log ORDER BY id"
            ).fetchall()
        )
        return [LogEntry(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7]) for r in rows]
