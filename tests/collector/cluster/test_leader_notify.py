"""Notification delivery under the leader lease on a real PostgreSQL ledger: the same
``Notifier`` as on SQLite, its claim step ``LeaderClaims``; a local webhook receiver says
what arrived. Across a leader change every event arrives once: the deposed leader (still
believing it leads) sends nothing, a leader killed after claiming leaves its rows to the
next, and a leader deposed while its service answers still records what it sent."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest

from collector.cluster.leader import Leader
from collector.cluster.outbox_claims import Holder
from collector.ledger.store import Ledger
from collector.notify.claims import LeaderClaims
from collector.notify.delivery import Notifier
from collector.notify.outbox import Outbox
from collector.notify.settings import NotificationSettings, resolve_channel
from tests.collector.cluster.rig import Database
from tests.collector.notify.fake_services import FakeService
from tests.collector.notify.rig import LINKS, HandClock, channel, fake, index_for, release_rec

SECRET = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM="
EVENTS = 5


@pytest.fixture
def ledger(db: Database) -> Iterator[Ledger]:
    opened = Ledger.open(db.url)
    db.connect()  # the cluster's tables (the lease keeper creates them)
    try:
        yield opened
    finally:
        opened.close()


def lead(conn: psycopg.Connection[Any], name: str) -> Holder:
    """``name`` takes the leader lease (the old one's expired first); its holder."""
    conn.execute("UPDATE cluster_leases SET expires_at = '-infinity' WHERE name = 'leader'")
    epoch = Leader(name, 30.0).tick(conn)
    assert epoch is not None
    return Holder(f"{name}/notify", "leader", name, epoch)


def notifier(
    ledger: Ledger,
    hook: FakeService,
    clock: HandClock,
    holder: Callable[[], Holder | None],
    claim_seconds: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> Notifier:
    settings = channel(hook, digest_interval_seconds=0)
    return Notifier(
        NotificationSettings(channels=[settings]),
        [resolve_channel(settings)],
        Outbox(ledger),
        LINKS,
        transport or httpx.HTTPTransport(),
        clock,
        claims=LeaderClaims(ledger, holder, claim_seconds),
    )


def told(hook: FakeService) -> Counter[str]:
    """How often each recommendation's "opened" event arrived."""
    return Counter(key for r in hook.accepted for key in r.json["data"]["events"])


def observed(n: Notifier, clock: HandClock) -> None:
    recs = [release_rec(i) for i in range(EVENTS)]
    assert n.observe(recs, index_for(*recs), clock.now) == EVENTS


def test_a_deposed_leader_that_still_believes_it_leads_sends_nothing(
    db: Database, ledger: Ledger
) -> None:
    conn, clock = db.connect(), HandClock()
    with fake("webhook", clock, SECRET) as hook:
        a_holds = lead(conn, "a")
        old = notifier(ledger, hook, clock, lambda: a_holds)
        observed(old, clock)
        b_holds = lead(conn, "b")  # a's lease expired; a has not renewed since
        new = notifier(ledger, hook, clock, lambda: b_holds)
        assert old.deliver() == 0
        assert new.deliver() == EVENTS
        assert old.deliver() == 0 and new.deliver() == 0
        times = told(hook)
    assert len(times) == EVENTS and set(times.values()) == {1}


def test_rows_a_dead_leader_claimed_are_sent_by_the_next_after_the_claim(
    db: Database, ledger: Ledger
) -> None:
    conn, clock = db.connect(), HandClock()
    with fake("webhook", clock, SECRET) as hook:
        a_holds = lead(conn, "a")
        dead = notifier(ledger, hook, clock, lambda: a_holds, claim_seconds=1.0)
        observed(dead, clock)
        ids = [p.id for p in dead.outbox.due("ops", clock.now)]
        assert dead.claims.claim(ids, clock.now) == ids  # ... and a is killed here
        b_holds = lead(conn, "b")
        new = notifier(ledger, hook, clock, lambda: b_holds)
        assert new.deliver() == 0  # still claimed by the dead leader
        time.sleep(1.2)  # the claim expires (server clock)
        assert new.deliver() == EVENTS
        times = told(hook)
    assert len(times) == EVENTS and set(times.values()) == {1}


class TakeOverDuringFirstSend(httpx.BaseTransport):
    """Forwards to the receiver; while the first message is on its way, ``take_over``
    runs (another replica becomes leader)."""

    def __init__(self, take_over: Callable[[], None]) -> None:
        self.inner, self.take_over, self.sends = httpx.HTTPTransport(), take_over, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sends += 1
        if self.sends == 1:
            self.take_over()
        return self.inner.handle_request(request)


def test_a_leader_deposed_while_its_service_answers_still_records_the_send(
    db: Database, ledger: Ledger
) -> None:
    conn, clock = db.connect(), HandClock()
    holders: dict[str, Holder] = {}
    with fake("webhook", clock, SECRET) as hook:
        holders["a"] = lead(conn, "a")
        transport = TakeOverDuringFirstSend(lambda: holders.update(b=lead(conn, "b")))
        old = notifier(ledger, hook, clock, lambda: holders["a"], transport=transport)
        observed(old, clock)
        assert old.deliver() == 1  # the first message; then its claims fail
        new = notifier(ledger, hook, clock, lambda: holders["b"])
        assert new.deliver() == EVENTS - 1
        times = told(hook)
    assert len(times) == EVENTS and set(times.values()) == {1}
