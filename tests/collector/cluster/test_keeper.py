"""The keeper thread's published LeaseState: fresh while renewing, stale when it cannot."""

from __future__ import annotations

import time

from collector.cluster.keeper import LeaseKeeper, LeaseState, connector
from tests.collector.cluster.rig import FAST, Database, keeper
from tests.ports import free_port_block


def test_a_renewing_keeper_is_fresh_leads_and_owns_every_shard(db: Database) -> None:
    k = keeper(db.url, "a")
    state = k.renew_once()
    assert state.fresh(time.monotonic()) and state.leader
    assert dict(state.shards) == {s: 1 for s in range(64)}
    assert state.live_replicas == 1
    k.stop()
    assert k.state.replica_id == "a"
    b = keeper(db.url, "b")
    other = b.renew_once()  # a gave everything back on stop
    b.stop()
    assert other.leader_epoch == 2 and len(other.shards) == 64


def test_an_unreachable_server_leaves_the_state_stale_not_an_exception() -> None:
    url = f"postgresql://nobody@127.0.0.1:{free_port_block(1)}/none"
    k = LeaseKeeper(FAST, "a", connector(url, FAST))
    state = k.renew_once()
    assert not state.fresh(time.monotonic()) and not state.leader


def test_freshness_is_one_lease_from_the_last_renewal() -> None:
    state = LeaseState("a", {1: 1}, None, 1, renewed_at=100.0, lease_seconds=15.0)
    assert state.fresh(114.9) and not state.fresh(115.0)
    assert not LeaseState("a").fresh(0.0)
