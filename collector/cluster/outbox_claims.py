"""Claiming the notification outbox on PostgreSQL: only the leader, each row by one claimer.

``claim_due`` runs under the leader's epoch (``leader.holds`` in the same transaction) and
takes due rows with ``FOR UPDATE SKIP LOCKED``, stamping each with the claimer, the epoch
and ``claimed_until`` (server clock): concurrent claimers (several sender threads, or an
old and a new leader) never get the same row. The claimer sends, then ``mark_sent``
marks the rows it still holds, in one statement, so a row is marked sent exactly once.

A claimer that dies after claiming leaves its rows claimed until ``claimed_until``; the
next claim after that takes them again, so the message is still sent. What no outbox can
close: a claimer stalled past ``claimed_until`` after its service answered (a longer
claim than the slowest send keeps it rare); the message id lets a receiver drop it.
``next_attempt_at`` and ``sent_at`` are the collector's clock, as in outbox.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from collector.cluster.leader import holds


@dataclass(frozen=True)
class Holder:
    """Who claims: a claimer name (unique per sender thread) under a lease and its epoch."""

    claimer: str
    lease: str
    owner: str
    epoch: int


@dataclass(frozen=True)
class Claimed:
    id: int
    channel: str
    event_key: str
    body: bytes
    attempts: int


_CLAIM = (
    "UPDATE notify_outbox SET claimed_by = %(claimer)s, claim_epoch = %(epoch)s, "
    "claimed_until = now() + %(claim)s * interval '1 second' "
    "WHERE id IN (SELECT id FROM notify_outbox WHERE state = 'pending' "
    "AND next_attempt_at <= %(now)s AND (%(channel)s::text IS NULL OR channel = %(channel)s) "
    "AND (claimed_until IS NULL OR claimed_until <= now()) "
    "ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) "
    "RETURNING id, channel, event_key, body, attempts"
)
_CLAIM_IDS = (
    "UPDATE notify_outbox SET claimed_by = %(claimer)s, claim_epoch = %(epoch)s, "
    "claimed_until = now() + %(claim)s * interval '1 second' "
    "WHERE id IN (SELECT id FROM notify_outbox WHERE id = ANY(%(ids)s) AND state = 'pending' "
    "AND next_attempt_at <= %(now)s AND (claimed_until IS NULL OR claimed_until <= now()) "
    "ORDER BY id FOR UPDATE SKIP LOCKED) RETURNING id"
)
_MINE = "claimed_by = %(claimer)s AND claim_epoch = %(epoch)s AND state = 'pending'"


def claim_due(
    conn: psycopg.Connection[Any],
    holder: Holder,
    now_seconds: float,
    claim_seconds: float,
    limit: int = 100,
    channel: str | None = None,
) -> list[Claimed]:
    """Claim up to ``limit`` due rows (of ``channel``, or any) for ``claim_seconds`` of
    server time; none when ``holder`` no longer holds its lease at its epoch."""
    args = {
        "claimer": holder.claimer, "epoch": holder.epoch, "claim": claim_seconds,
        "now": now_seconds, "channel": channel, "limit": limit,
    }  # fmt: skip
    with conn.transaction():
        if not holds(conn, holder.lease, holder.owner, holder.epoch):
            return []
        rows = conn.execute(_CLAIM, args).fetchall()
    claimed = [Claimed(r[0], r[1], r[2], bytes(r[3]), r[4]) for r in rows]
    return sorted(claimed, key=lambda c: c.id)


def claim_ids(
    conn: psycopg.Connection[Any],
    holder: Holder,
    ids: Sequence[int],
    now_seconds: float,
    claim_seconds: float,
) -> list[int]:
    """Claim those of ``ids`` still pending, due and unclaimed (the rows a sender chose to
    put in one message), as ``claim_due`` does; the ids claimed, in order."""
    args = {
        "claimer": holder.claimer, "epoch": holder.epoch, "claim": claim_seconds,
        "now": now_seconds, "ids": list(ids),
    }  # fmt: skip
    with conn.transaction():
        if not holds(conn, holder.lease, holder.owner, holder.epoch):
            return []
        rows = conn.execute(_CLAIM_IDS, args).fetchall()
    return sorted(int(r[0]) for r in rows)


def mark_sent(
    conn: psycopg.Connection[Any],
    holder: Holder,
    ids: Sequence[int],
    message_id: str,
    now_seconds: float,
) -> int:
    """Mark the rows of ``ids`` this holder still holds as sent; the count marked.

    Fenced by the row's claim, not by the leader lease: a leader that lost its lease after
    the service answered still records the send (else the next leader would repeat it);
    a row another claimer has taken since is left to that claimer."""
    with conn.transaction():
        cursor = conn.execute(
            "UPDATE notify_outbox SET state = 'sent', message_id = %(message)s, "
            "sent_at = %(now)s, attempts = attempts + 1, claimed_until = NULL "
            f"WHERE id = ANY(%(ids)s) AND {_MINE}",
            {"message": message_id, "now": now_seconds, "ids": list(ids),
             "claimer": holder.claimer, "epoch": holder.epoch},
        )  # fmt: skip
        return cursor.rowcount


def give_back(
    conn: psycopg.Connection[Any],
    holder: Holder,
    ids: Sequence[int],
    retry_at_seconds: float,
    count_attempt: bool = True,
) -> int:
    """Return rows whose send failed: due again at ``retry_at_seconds``, one attempt more
    (unless ``count_attempt`` is false: a rate limit), free for the next claim at once."""
    with conn.transaction():
        cursor = conn.execute(
            "UPDATE notify_outbox SET next_attempt_at = %(retry)s, "
            "attempts = attempts + %(more)s, "
            f"claimed_until = NULL WHERE id = ANY(%(ids)s) AND {_MINE}",
            {"retry": retry_at_seconds, "ids": list(ids), "claimer": holder.claimer,
             "epoch": holder.epoch, "more": int(count_attempt)},
        )  # fmt: skip
        return cursor.rowcount
