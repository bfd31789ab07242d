"""Three ``gpufleet collector`` replicas on one real PostgreSQL 15 (issue 18): each
simulated agent picks its replica, two replicas (the leader first) are ``kill -9``-ed and
restarted mid-stream, and still energy per GPU and workload and the idle time equal the
simulator's truth, nothing counted twice, and every replica's /v1/fleet lists every GPU
in the same state. The same stream as test_restart.py's (30 simulated minutes here, every
10 s), the replicas on short leases (3 s) so the survivors take the dead one's shards
over mid-stream."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import psycopg
import pytest

from agent.sources.simulated.source import build_fleet
from collector.ledger.store import Ledger
from gpufleet.cli.demo_fleet import SimClock
from tests.e2e.collector_process import CollectorProcess
from tests.e2e.fleet_rig import TOKEN, Agent, build_agent, free_port
from tests.e2e.test_restart import apply_the_rest, check_against_truth, drain, flush
from tests.postgres import PostgresServer

pytestmark = pytest.mark.slow

STEP_SECONDS = 10.0
HISTORY_SECONDS = 30 * 60.0
TICKS = int(HISTORY_SECONDS / STEP_SECONDS)
SHIP_EVERY_TICKS = 3
KILL_LEADER_AT, RESTART_LEADER_AT = 50, 80
KILL_OTHER_AT, RESTART_OTHER_AT = 110, 140
AUTH = {"Authorization": f"Bearer {TOKEN}"}

CONFIG = f"""
analysis:
  stale_after_seconds: {3 * STEP_SECONDS}
ingest:
  apply_interval_seconds: 0.5
  commit_interval_seconds: 1
cluster:
  enabled: true
  lease_seconds: 3
  renew_seconds: 1
"""


def leader_of(url: str, replicas: list[CollectorProcess]) -> int:
    """The index of the replica holding the leader lease (its id holds its pid)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT owner FROM cluster_leases WHERE name = 'leader' AND expires_at > now()"
            ).fetchone()
        for i, r in enumerate(replicas):
            if row and r.proc is not None and f"-{r.proc.pid}-" in str(row[0]):
                return i
        time.sleep(0.2)
    raise AssertionError("no replica leads")


def stream(clock: SimClock, agents: list[Agent], replicas: list[CollectorProcess],
           url: str) -> list[int]:  # fmt: skip
    """Sample and ship the whole history; returns the replicas killed, in order."""
    start, killed = clock(), []
    for tick in range(TICKS + 1):
        clock.set(start + tick * STEP_SECONDS)
        for agent in agents:
            agent.sampler.tick()
        if tick % SHIP_EVERY_TICKS == 0:
            flush(agents)
        if tick == KILL_LEADER_AT:
            killed.append(leader_of(url, replicas))
            replicas[killed[0]].kill()
        if tick == KILL_OTHER_AT:
            killed.append((killed[0] + 1) % len(replicas))
            replicas[killed[1]].kill()
        if tick in (RESTART_LEADER_AT, RESTART_OTHER_AT):
            replicas[killed[-1]].start()
    return killed


def fleet_states(replica: CollectorProcess) -> dict[str, str]:
    body = httpx.get(replica.url + "/v1/fleet", headers=AUTH, timeout=10).raise_for_status()
    return {g["uuid"]: g["state"] for g in body.json()["gpus"]}


def same_fleet_everywhere(replicas: list[CollectorProcess], uuids: set[str]) -> None:
    """Every replica lists every GPU, in the same state, within a few seconds."""
    deadline = time.monotonic() + 10
    while True:
        seen = [fleet_states(r) for r in replicas]
        if all(set(s) == uuids for s in seen) and all(s == seen[0] for s in seen):
            return
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)


def applied_by_replicas(url: str, uuids: set[str], now: float) -> None:
    """The replicas themselves (not the last start) applied every GPU up to the reorder
    window (30 s) and the commit interval: the dead replicas' shards were taken over."""
    deadline = time.monotonic() + 15
    while True:
        with Ledger.open(url) as ledger:
            cursors = {c.gpu_uuid: c.applied_until for c in ledger.cursors().values()}
        if set(cursors) == uuids and min(cursors.values()) >= now - 30 - 3 * STEP_SECONDS:
            return
        assert time.monotonic() < deadline, sorted(cursors.values())[:3]
        time.sleep(0.5)


def test_three_replicas_with_two_kill_9_count_everything_once(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    start = time.time() - HISTORY_SECONDS
    fleet = build_fleet(start_time=start)
    clock = SimClock(start)
    config = tmp_path / "collector.yaml"
    config.write_text(CONFIG)
    url = postgres.new_database()
    replicas = [
        CollectorProcess(config, free_port(), url, TOKEN, tmp_path / f"replica-{i}.log")
        for i in range(3)
    ]
    # each agent's own choice: node i sends to replica i mod 3
    agents = [build_agent(node, replicas[i % 3].url, clock, STEP_SECONDS, tmp_path / node.name)
              for i, node in enumerate(fleet.nodes)]  # fmt: skip
    try:
        for replica in replicas:
            replica.start()
        killed = stream(clock, agents, replicas, url)
        drain(agents)
        applied_by_replicas(url, set(fleet.gpu_uuids), clock())
        same_fleet_everywhere(replicas, set(fleet.gpu_uuids))
        for replica in replicas:
            replica.terminate()
    finally:
        for replica in replicas:
            replica.stop_if_running()
        for agent in agents:
            agent.shipper.close()
    assert len(set(killed)) == 2  # two different replicas, the leader first
    assert all(a.stats.snapshot().spool_dropped_batches_total == 0 for a in agents)
    apply_the_rest(config, url)  # type: ignore[arg-type]
    with Ledger.open(url) as ledger:
        assert not ledger.pending_batches()
    check_against_truth(fleet, url, start, clock())  # type: ignore[arg-type]
