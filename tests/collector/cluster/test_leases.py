"""Shard leases on a real PostgreSQL: claims, rebalancing, expiry and the epoch fence."""

from __future__ import annotations

import threading
import time

import pytest

from collector.cluster.keeper import LeaseKeeper
from collector.cluster.leases import ShardLeases, owns
from collector.cluster.schema import ClusterError, migrate
from tests.collector.cluster.rig import FAST, Database, counts, keeper, owners


def leases(name: str, lease_seconds: float = FAST.lease_seconds) -> ShardLeases:
    return ShardLeases(name, FAST.shard_count, lease_seconds)


def test_a_lone_replica_takes_every_shard_at_epoch_one(db: Database) -> None:
    conn = db.connect()
    held = leases("a").tick(conn)
    assert held == {shard: 1 for shard in range(64)}
    assert counts(conn) == {"a": 64}
    assert leases("a").tick(conn) == held  # a renewal keeps the epochs


def test_a_joiner_gets_half_and_a_leaver_gives_its_half_back(db: Database) -> None:
    conn = db.connect()
    a, b = leases("a"), leases("b")
    a.tick(conn)
    b.tick(conn)  # a is over its new target of 32 only at its next tick
    assert counts(conn) == {"a": 64}
    a.tick(conn)
    b.tick(conn)
    assert counts(conn) == {"a": 32, "b": 32}
    moved = set(b.epochs)
    assert all(b.epochs[s] == 2 for s in moved)  # a second acquisition: a higher epoch
    b.release_all(conn)
    assert a.tick(conn).keys() == set(range(64))
    assert counts(conn) == {"a": 64}


def test_three_replicas_split_the_shards_with_no_shard_left_over(db: Database) -> None:
    conn = db.connect()
    replicas = [leases(n) for n in "abc"]
    for _ in range(3):
        for replica in replicas:
            replica.tick(conn)
    assert sorted(counts(conn).items()) == [("a", 22), ("b", 22), ("c", 20)]
    held = [set(r.epochs) for r in replicas]
    assert set.union(*held) == set(range(64))
    assert sum(map(len, held)) == 64  # disjoint


def test_an_expired_lease_is_taken_over_and_not_before(db: Database) -> None:
    conn = db.connect()
    a, b = leases("a", lease_seconds=1.0), leases("b", lease_seconds=1.0)
    a.tick(conn)
    b.tick(conn)
    assert counts(conn) == {"a": 64}  # b waits: a's leases are fresh
    time.sleep(1.2)  # a is gone: neither its heartbeat nor its leases are renewed
    assert b.tick(conn) == {s: 2 for s in range(64)}
    ends = conn.execute("SELECT min(acquired_at) FROM cluster_shards").fetchone()
    assert ends is not None and ends[0] is not None
    assert not any(owns(conn, "a", s, 1) for s in range(64))


def test_the_epoch_fence_holds_off_a_takeover_until_the_applier_commits(
    db: Database,
) -> None:
    setup, applier, other = db.connect(), db.connect(), db.connect()
    a, b = leases("a", lease_seconds=1.0), leases("b", lease_seconds=1.0)
    a.tick(setup)
    time.sleep(1.2)  # a's leases expire while its applier is about to write shard 7
    with applier.transaction():
        assert owns(applier, "a", 7, 1)  # locks shard 7's lease row until commit
        taken = b.tick(other)
        assert 7 not in taken and len(taken) == 63
    assert 7 in b.tick(other)  # after the commit, the next claim takes it
    with applier.transaction():
        assert not owns(applier, "a", 7, 1)  # a, fenced: it must not apply shard 7 now


def test_a_replica_with_another_shard_count_is_refused(db: Database) -> None:
    conn = db.connect()
    with pytest.raises(ClusterError, match=r"cluster.shard_count: this replica has 32.*64"):
        migrate(conn, 32)


def test_replica_threads_under_churn_never_apply_a_shard_at_a_stale_epoch(
    db: Database,
) -> None:
    """Keepers join and leave while appliers write through the fence: per shard, once an
    epoch has written, no lower epoch writes again, and each epoch belongs to one replica."""
    url = db.url
    conn = db.connect()
    conn.execute(
        "CREATE TABLE applied (id BIGSERIAL PRIMARY KEY, shard INT, owner TEXT, epoch BIGINT)"
    )
    stop = threading.Event()

    def apply_loop(k: LeaseKeeper) -> None:
        mine = db.connect()
        while not stop.is_set():
            for shard, epoch in dict(k.state.shards).items():
                with mine.transaction():
                    if owns(mine, k.state.replica_id, shard, epoch):
                        mine.execute(
                            "INSERT INTO applied (shard, owner, epoch) VALUES (%s, %s, %s)",
                            (shard, k.state.replica_id, epoch),
                        )
            time.sleep(0.02)

    keepers = [keeper(url, f"r{i}") for i in range(3)]
    threads = []
    for k in keepers:
        k.start()
        threads.append(threading.Thread(target=apply_loop, args=(k,)))
        threads[-1].start()
    time.sleep(1.5)
    keepers[0].stop()  # a clean leave: its shards move at once
    late = keeper(url, "r3")
    late.start()
    threads.append(threading.Thread(target=apply_loop, args=(late,)))
    threads[-1].start()
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join()
    for k in (*keepers[1:], late):
        k.stop()
    rows = conn.execute("SELECT shard, owner, epoch FROM applied ORDER BY id").fetchall()
    assert len({owner for _, owner, _ in rows}) == 4  # every replica applied something
    newest: dict[int, int] = {}
    holder: dict[tuple[int, int], str] = {}
    for shard, owner, epoch in rows:
        assert epoch >= newest.get(shard, 0), f"shard {shard} applied at a stale epoch"
        newest[shard] = epoch
        assert holder.setdefault((shard, epoch), owner) == owner
    assert owners(conn) == dict.fromkeys(range(64))  # everybody left cleanly
