"""Recommendations in the ledger: columns for what is queried, a JSON body for the rest.

A dismissal is the operator's word: re-evaluation may refresh a dismissed
recommendation's figures, but its status stays ``dismissed`` (a re-evaluation that read
the recommendation just before the dismissal cannot undo it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

import msgspec

from collector.ledger.records import LedgerError
from collector.ledger.sql import Connection
from collector.records import Recommendation, RecommendationKind, RecommendationStatus, Savings

_COLS = "id, kind, subject, status, opened_at, updated_at, resolved_at, dismissed_by, body"
_DISMISSED = RecommendationStatus.DISMISSED.value
_KEEP = f"recommendations.status = '{_DISMISSED}'"


class _Body(msgspec.Struct, frozen=True):
    title: str
    evidence: dict[str, Any]
    savings: dict[str, Any]
    gpu_uuids: list[str]
    node: str
    workload_key: str
    namespace: str


_DECODER = msgspec.json.Decoder(_Body)


def _encode(rec: Recommendation) -> tuple[Any, ...]:
    body = _Body(
        rec.title,
        rec.evidence,
        _savings_dict(rec.savings),
        list(rec.gpu_uuids),
        rec.node,
        rec.workload_key,
        rec.namespace,
    )
    try:
        blob = msgspec.json.encode(body)
    except (TypeError, msgspec.EncodeError) as err:
        raise LedgerError(f"recommendation {rec.id}: evidence is not JSON: {err}") from err
    return (
        rec.id,
        rec.kind.value,
        rec.subject,
        rec.status.value,
        rec.opened_at,
        rec.updated_at,
        rec.resolved_at,
        rec.savings.money_per_month,
        blob,
    )


def _savings_dict(savings: Savings) -> dict[str, Any]:
    return {name: getattr(savings, name) for name in Savings.__slots__}


def _decode(row: tuple[Any, ...]) -> Recommendation:
    rid, kind, subject, status, opened_at, updated_at, resolved_at, dismissed_by, blob = row
    body = _DECODER.decode(blob)
    evidence = dict(body.evidence)
    if dismissed_by:
        evidence["dismissed_by"] = dismissed_by
    return Recommendation(
        id=rid,
        kind=RecommendationKind(kind),
        subject=subject,
        title=body.title,
        evidence=evidence,
        savings=Savings(**body.savings),
        status=RecommendationStatus(status),
        opened_at=opened_at,
        updated_at=updated_at,
        gpu_uuids=tuple(body.gpu_uuids),
        node=body.node,
        workload_key=body.workload_key,
        namespace=body.namespace,
        resolved_at=resolved_at,
    )


def upsert(conn: Connection, recs: Sequence[Recommendation]) -> None:
    conn.executemany(
        "INSERT INTO recommendations (id, kind, subject, status, opened_at, updated_at, "
        "resolved_at, money_per_month, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, subject = excluded.subject, "
        f"status = CASE WHEN {_KEEP} THEN recommendations.status ELSE excluded.status END, "
        f"resolved_at = CASE WHEN {_KEEP} THEN recommendations.resolved_at "
        "ELSE excluded.resolved_at END, "
        "opened_at = excluded.opened_at, updated_at = excluded.updated_at, "
        "money_per_month = excluded.money_per_month, body = excluded.body",
        [_encode(rec) for rec in recs],
    )


def select(
    conn: Connection, statuses: Collection[RecommendationStatus] | None
) -> list[Recommendation]:
    """Largest saving first; all statuses when ``statuses`` is None."""
    where = ""
    args: tuple[str, ...] = ()
    if statuses is not None:
        args = tuple(RecommendationStatus(s).value for s in statuses)
        if not args:  # "IN ()" is SQLite's, not PostgreSQL's
            return []
        where = f"WHERE status IN ({', '.join('?' for _ in args)})"
    rows = conn.execute(
        f"SELECT {_COLS} FROM recommendations {where} ORDER BY money_per_month DESC, id", args
    )
    return _with_directory(conn, [_decode(r) for r in rows])


def get(conn: Connection, rec_id: str) -> Recommendation | None:
    row = conn.execute(f"SELECT {_COLS} FROM recommendations WHERE id = ?", (rec_id,)).fetchone()
    return None if row is None else _with_directory(conn, [_decode(row)])[0]


#: keys per directory query (SQLite allows 32,766 parameters, PostgreSQL 65,535)
_KEYS_PER_QUERY = 500


def _with_directory(conn: Connection, recs: list[Recommendation]) -> list[Recommendation]:
    """Each workload recommendation with its workload's team, user and owner as the
    workloads table knows them now."""
    keys = sorted({r.workload_key for r in recs if r.workload_key})
    known: dict[str, tuple[str, str, str]] = {}
    for i in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[i : i + _KEYS_PER_QUERY]
        rows = conn.execute(
            'SELECT key, team, "user", owner FROM workloads '
            f"WHERE key IN ({', '.join('?' for _ in chunk)})",
            tuple(chunk),
        )
        known.update((key, (team, user, owner)) for key, team, user, owner in rows)
    out = []
    for rec in recs:
        found = known.get(rec.workload_key)
        if found is not None and any(found):
            team, user, owner = found
            rec = replace(rec, team=team, user=user, owner=owner)
        out.append(rec)
    return out


def restore(conn: Connection, rec_id: str, now: float) -> Recommendation | None:
    """Undo a dismissal: OPEN again (``updated_at`` = now, the hysteresis resolves it if it
    is no longer desired); a recommendation not dismissed is left as it is; None when there
    is no such id."""
    conn.execute(
        "UPDATE recommendations SET status = ?, updated_at = ?, resolved_at = NULL, "
        "dismissed_by = '' WHERE id = ? AND status = ?",
        (RecommendationStatus.OPEN.value, now, rec_id, _DISMISSED),
    )
    return get(conn, rec_id)


def dismiss(conn: Connection, rec_id: str, now: float, by: str) -> Recommendation | None:
    """Mark dismissed (``resolved_at`` = ``updated_at`` = now); None when there is no such id."""
    conn.execute(
        "UPDATE recommendations SET status = ?, updated_at = ?, resolved_at = ?, "
        "dismissed_by = ? WHERE id = ?",
        (_DISMISSED, now, now, by, rec_id),
    )
    return get(conn, rec_id)
