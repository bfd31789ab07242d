"""The notification outbox and what was last told, in the ledger (schema v2).

Why a restart neither drops nor repeats a message: an event is stored per channel (unique
``(channel, event_key)``) in the same transaction that records what the channels were
told, before anything is sent; a row leaves ``pending`` only in the transaction that
follows the service's success answer. The one remaining window is a crash between that
answer and the commit (milliseconds); the Standard Webhooks ``webhook-id`` lets a
receiver drop the repeat.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

from collector.ledger.sql import Connection
from collector.ledger.store import Ledger
from collector.notify.changes import Notified
from collector.notify.messages import Event

_DECODER = msgspec.json.Decoder(Event)


@dataclass(frozen=True)
class Pending:
    id: int
    channel: str
    event: Event
    created_at: float
    attempts: int


class Outbox:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def record(
        self, items: Sequence[tuple[Event | None, Notified, Sequence[str]]], now: float
    ) -> int:
        """Store each event for its channels and what is now told, in one transaction.
        Returns the rows added (a repeated event key adds none)."""
        added = 0
        with self.ledger.write_transaction() as conn:
            for event, told, channels in items:
                if event is not None:
                    added += _insert(conn, event, channels, now)
                _save_told(conn, told)
        return added

    def enqueue(self, event: Event, channels: Sequence[str], now: float) -> int:
        with self.ledger.write_transaction() as conn:
            return _insert(conn, event, channels, now)

    def told(self) -> dict[str, Notified]:
        rows = self.ledger.read(
            lambda c: c.execute(
                "SELECT subject, status, fingerprint, notified_at FROM notify_state"
            ).fetchall()
        )
        return {r[0]: Notified(*r) for r in rows}

    def due(self, channel: str, now: float) -> list[Pending]:
        rows = self.ledger.read(
            lambda c: c.execute(
                "SELECT id, channel, body, created_at, attempts FROM notify_outbox "
                "WHERE state = 'pending' AND channel = ? AND next_attempt_at <= ? ORDER BY id",
                (channel, now),
            ).fetchall()
        )
        return [Pending(r[0], r[1], _DECODER.decode(r[2]), r[3], r[4]) for r in rows]

    def messages_sent_since(self, channel: str, since: float) -> int:
        """Distinct messages (a digest is one) sent to ``channel`` after ``since``."""
        row = self.ledger.read(
            lambda c: c.execute(
                "SELECT COUNT(DISTINCT message_id) FROM notify_outbox "
                "WHERE channel = ? AND state = 'sent' AND sent_at > ?",
                (channel, since),
            ).fetchone()
        )
        return int(row[0])

    def mark_sent(self, ids: Iterable[int], message_id: str, now: float) -> None:
        with self.ledger.write_transaction() as conn:
            conn.executemany(
                "UPDATE notify_outbox SET state = 'sent', message_id = ?, sent_at = ?, "
                "attempts = attempts + 1 WHERE id = ?",
                [(message_id, now, i) for i in ids],
            )

    def defer(self, ids: Iterable[int], until: float, count_attempt: bool) -> None:
        with self.ledger.write_transaction() as conn:
            conn.executemany(
                "UPDATE notify_outbox SET next_attempt_at = ?, attempts = attempts + ? "
                "WHERE id = ?",
                [(until, int(count_attempt), i) for i in ids],
            )

    def pending_by_channel(self) -> dict[str, int]:
        rows = self.ledger.read(
            lambda c: c.execute(
                "SELECT channel, COUNT(*) FROM notify_outbox WHERE state = 'pending' "
                "GROUP BY channel"
            ).fetchall()
        )
        return {r[0]: int(r[1]) for r in rows}

    def prune(self, before: float) -> int:
        """Delete messages sent before ``before`` and what was told about recommendations
        resolved or dismissed before it; pending messages always stay."""
        with self.ledger.write_transaction() as conn:
            sent = conn.execute(
                "DELETE FROM notify_outbox WHERE state = 'sent' AND sent_at < ?", (before,)
            ).rowcount
            told = conn.execute(
                "DELETE FROM notify_state WHERE status != 'live' AND notified_at < ?", (before,)
            ).rowcount
        return int(sent) + int(told)

    def sent_events(self, channel: str) -> list[str]:
        """Event keys sent to ``channel``, in sending order (for tests and the API)."""
        rows = self.ledger.read(
            lambda c: c.execute(
                "SELECT event_key FROM notify_outbox WHERE channel = ? AND state = 'sent' "
                "ORDER BY sent_at, id",
                (channel,),
            ).fetchall()
        )
        return [r[0] for r in rows]


def _insert(conn: Connection, event: Event, channels: Sequence[str], now: float) -> int:
    body = msgspec.json.encode(event)
    if not channels:
        return 0
    cursor = conn.executemany(
        "INSERT INTO notify_outbox (channel, event_key, created_at, body, "
        "next_attempt_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(name, event.key, now, body, now) for name in channels],
    )
    return cursor.rowcount


def _save_told(conn: Connection, told: Notified) -> None:
    conn.execute(
        "INSERT INTO notify_state (subject, status, fingerprint, notified_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (subject) DO UPDATE SET status = excluded.status, "
        "fingerprint = excluded.fingerprint, notified_at = excluded.notified_at",
        (told.subject, told.status, told.fingerprint, told.notified_at),
    )
