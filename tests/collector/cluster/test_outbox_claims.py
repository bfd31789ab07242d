"""Outbox claims on a real PostgreSQL: no message sent twice, none lost to a dead claimer."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import psycopg

from collector.cluster.leader import Leader
from collector.cluster.outbox_claims import Holder, claim_due, give_back, mark_sent
from tests.collector.cluster.rig import Database


def enqueue(conn: psycopg.Connection[Any], count: int, channel: str = "ops") -> None:
    conn.execute(
        "INSERT INTO notify_outbox (channel, event_key, created_at, body, next_attempt_at) "
        "SELECT %s, 'event-' || g, 0, convert_to('{}', 'UTF8'), 0 FROM generate_series(1, %s) g",
        (channel, count),
    )


def lead(conn: psycopg.Connection[Any], name: str, lease_seconds: float = 30.0) -> int:
    epoch = Leader(name, lease_seconds).tick(conn)
    assert epoch is not None
    return epoch


def test_concurrent_claimers_send_each_message_exactly_once(db: Database) -> None:
    conn = db.connect()
    enqueue(conn, 300)
    epoch = lead(conn, "a")
    sent: list[tuple[str, str]] = []  # (event key, claimer) as a chat server would see them
    lock = threading.Lock()

    def sender(worker: int) -> None:
        mine = db.connect()
        holder = Holder(f"a/{worker}", "leader", "a", epoch)
        while batch := claim_due(mine, holder, now_seconds=1.0, claim_seconds=30.0, limit=7):
            with lock:
                sent.extend((c.event_key, holder.claimer) for c in batch)
            time.sleep(0.002)  # the service's answer takes a moment
            assert mark_sent(mine, holder, [c.id for c in batch], "m", 1.0) == len(batch)

    threads = [threading.Thread(target=sender, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = Counter(key for key, _ in sent)
    assert len(times) == 300 and set(times.values()) == {1}
    assert len({claimer for _, claimer in sent}) > 1  # they really ran side by side
    assert conn.execute("SELECT count(*) FROM notify_outbox WHERE state <> 'sent'").fetchone() == (
        0,
    )


def test_a_deposed_leader_claims_nothing(db: Database) -> None:
    conn = db.connect()
    enqueue(conn, 5)
    old = lead(conn, "a", lease_seconds=0.5)
    time.sleep(0.6)
    new = lead(conn, "b")
    assert claim_due(conn, Holder("a/0", "leader", "a", old), 1.0, 30.0) == []
    assert len(claim_due(conn, Holder("b/0", "leader", "b", new), 1.0, 30.0)) == 5


def test_a_dead_claimer_s_messages_are_sent_after_its_claim_expires(db: Database) -> None:
    conn = db.connect()
    enqueue(conn, 4)
    epoch = lead(conn, "a")
    dead = Holder("a/0", "leader", "a", epoch)
    assert len(claim_due(conn, dead, 1.0, claim_seconds=1.0)) == 4  # ... and a dies here
    alive = Holder("a/1", "leader", "a", epoch)
    assert claim_due(conn, alive, 1.0, 1.0) == []  # still claimed
    [until] = conn.execute("SELECT max(claimed_until) FROM notify_outbox").fetchone() or [None]
    time.sleep(1.1)
    again = claim_due(conn, alive, 1.0, 30.0)
    assert [c.event_key for c in again] == [f"event-{i}" for i in range(1, 5)]
    [taken] = conn.execute("SELECT min(claimed_until) FROM notify_outbox").fetchone() or [None]
    assert (taken - until).total_seconds() >= 30.0 - 0.001  # claimed again after it expired
    assert mark_sent(conn, dead, [c.id for c in again], "late", 2.0) == 0  # dead one is fenced
    assert mark_sent(conn, alive, [c.id for c in again], "m", 2.0) == 4


def test_a_failed_send_is_given_back_and_due_again_later(db: Database) -> None:
    conn = db.connect()
    enqueue(conn, 2)
    holder = Holder("a/0", "leader", "a", lead(conn, "a"))
    batch = claim_due(conn, holder, 1.0, 30.0)
    assert give_back(conn, holder, [c.id for c in batch], retry_at_seconds=60.0) == 2
    assert claim_due(conn, holder, 59.0, 30.0) == []
    assert [c.attempts for c in claim_due(conn, holder, 60.0, 30.0)] == [1, 1]
