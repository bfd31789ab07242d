"""The leader lease: one leader, a higher epoch on every change, failover on expiry only."""

from __future__ import annotations

import time

from collector.cluster.leader import Leader, holds
from tests.collector.cluster.rig import Database


def test_one_leads_and_the_other_waits_while_the_lease_is_fresh(db: Database) -> None:
    conn = db.connect()
    a, b = Leader("a", 1.0), Leader("b", 1.0)
    assert a.tick(conn) == 1
    assert b.tick(conn) is None
    assert a.tick(conn) == 1  # renewed, same epoch
    assert holds(conn, "leader", "a", 1) and not holds(conn, "leader", "b", 1)


def test_a_silent_leader_is_replaced_after_expiry_at_a_higher_epoch(db: Database) -> None:
    conn = db.connect()
    a, b = Leader("a", 1.0), Leader("b", 1.0)
    a.tick(conn)
    [expires] = conn.execute("SELECT expires_at FROM cluster_leases").fetchone() or [None]
    time.sleep(1.1)
    assert b.tick(conn) == 2
    [acquired] = conn.execute("SELECT acquired_at FROM cluster_leases").fetchone() or [None]
    assert acquired >= expires
    assert a.tick(conn) is None  # a comes back: it is no longer leader
    assert not holds(conn, "leader", "a", 1)


def test_stepping_down_hands_over_at_once(db: Database) -> None:
    conn = db.connect()
    a, b = Leader("a", 30.0), Leader("b", 30.0)
    a.tick(conn)
    a.step_down(conn)
    assert b.tick(conn) == 2
