"""Who may send an outbox row: the claim step between choosing a message and sending it.

One delivery path (delivery.py) for both ledgers; only this step differs:
- ``LocalClaims`` (SQLite, or one collector on PostgreSQL): the only sender, every row is
  its own; sent and deferred rows are written as outbox.py always did.
- ``LeaderClaims`` (replicas on PostgreSQL): a row is sent only after the leader claimed
  it under its epoch (collector/cluster/outbox_claims.py, ``FOR UPDATE SKIP LOCKED``), and
  marked sent only while that claim holds. An old leader that has not yet noticed it was
  deposed claims nothing; a leader killed after claiming leaves its rows to the next one
  once the claim expires. So a message is never lost across a change, and sent twice only
  where a leader dies (or its service's answer is lost) between the service accepting it
  and the row marked sent, a window of one ledger write: the next leader sends it again
  under the same ``webhook-id`` (webhook.py: the same events, the same id), which a
  receiver drops; chat vendors without such a key may show it twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from collector.cluster.outbox_claims import Holder, claim_ids, give_back, mark_sent
from collector.ledger.postgres import PgConnection
from collector.ledger.store import Ledger
from collector.notify.outbox import Outbox

log = logging.getLogger(__name__)


class Claims(Protocol):
    def claim(self, ids: Sequence[int], now: float) -> list[int]:
        """Those of ``ids`` this sender may send now."""
        ...

    def sent(self, ids: Sequence[int], message_id: str, now: float) -> None: ...

    def defer(self, ids: Sequence[int], until: float, count_attempt: bool) -> None: ...


class LocalClaims:
    """The only sender on its ledger."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox

    def claim(self, ids: Sequence[int], now: float) -> list[int]:
        return list(ids)

    def sent(self, ids: Sequence[int], message_id: str, now: float) -> None:
        self.outbox.mark_sent(ids, message_id, now)

    def defer(self, ids: Sequence[int], until: float, count_attempt: bool) -> None:
        self.outbox.defer(ids, until, count_attempt)


class LeaderClaims:
    """Claims under the leader lease; ``holder`` is who holds it now (None: not leading).

    ``claim_seconds`` must outlast the slowest send (the service's timeout and more): a
    claim that expired while its service answered would let the next leader send again."""

    def __init__(
        self, ledger: Ledger, holder: Callable[[], Holder | None], claim_seconds: float
    ) -> None:
        self.ledger, self.holder, self.claim_seconds = ledger, holder, claim_seconds
        self._holders: dict[int, Holder] = {}  # row id -> the holder that claimed it

    def claim(self, ids: Sequence[int], now: float) -> list[int]:
        holder = self.holder()
        if holder is None:
            return []
        with self.ledger.write_transaction() as conn:
            assert isinstance(conn, PgConnection)
            claimed = claim_ids(conn.raw, holder, ids, now, self.claim_seconds)
        self._holders.update(dict.fromkeys(claimed, holder))
        return claimed

    def sent(self, ids: Sequence[int], message_id: str, now: float) -> None:
        for holder, mine in self._by_holder(ids).items():
            with self.ledger.write_transaction() as conn:
                assert isinstance(conn, PgConnection)
                marked = mark_sent(conn.raw, holder, mine, message_id, now)
            if marked < len(mine):
                log.warning(
                    "notification outbox: %d of %d sent rows were claimed by another "
                    "sender meanwhile (claim outlived: raise notifications.timeout_seconds' "
                    "margin); the receiver may see message %s twice",
                    len(mine) - marked, len(mine), message_id,
                )  # fmt: skip

    def defer(self, ids: Sequence[int], until: float, count_attempt: bool) -> None:
        for holder, mine in self._by_holder(ids).items():
            with self.ledger.write_transaction() as conn:
                assert isinstance(conn, PgConnection)
                give_back(conn.raw, holder, mine, until, count_attempt)

    def _by_holder(self, ids: Sequence[int]) -> dict[Holder, list[int]]:
        out: dict[Holder, list[int]] = {}
        for i in ids:
            holder = self._holders.pop(i, None)
            if holder is not None:
                out.setdefault(holder, []).append(i)
        return out
