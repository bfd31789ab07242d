"""Three ``gpufleet collector`` replicas on one real PostgreSQL 15 (issue 18): each
simulated agent picks its replica, two replicas (the leader first) are ``kill -9``-ed and
restarted mid-stream, and still energy per GPU and workload and the idle time equal the
simulator's truth, nothing counted twice, and every replica's /v1/fleet lists every GPU
in the same state, and every recommendation reaches a local chat server exactly once
across both kills (again, under the same webhook-id, only where its sender never saw the
answer: killed between the service's answer and the row marked sent, or timed out).
The same stream as test_restart.py's (30 simulated minutes here, every 10 s), the
replicas on short leases (3 s) so the survivors take the dead one's shards over
mid-stream. The fleet's stuck jobs hold idle GPUs from the first sample, so their
release_idle recommendations open as soon as the leader evaluates; the stream waits at the
leader's kill until one has. The history is replayed faster than the wall clock runs, so
the collector measures no clock offset for the nodes (collector/fleet/clocks.py: a replay is
no offset to correct) and judges staleness on its own clock: ``stale_after_seconds`` is
longer than the history, else every GPU would be ``unknown`` until the end (its last
sample is the stream's duration behind the wall clock even then) and no recommendation
would open at all. The simulated agents sample every 10 s without gaps, so the longer
threshold changes no accounting."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from agent.sources.simulated.source import build_fleet
from collector.ledger.store import Ledger
from gpufleet.cli.demo_fleet import SimClock
from tests.collector.notify.fake_services import FakeService
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
ALERT_EVERY_TICKS = 5  # an Alertmanager alert to a live replica: chat messages all along
AUTH = {"Authorization": f"Bearer {TOKEN}"}

CONFIG = f"""
analysis:
  # the replayed history runs ahead of the wall clock: fresh until it is an hour old
  stale_after_seconds: {2 * HISTORY_SECONDS}
  evaluation_interval_seconds: 5
ingest:
  apply_interval_seconds: 0.5
  commit_interval_seconds: 1
cluster:
  enabled: true
  lease_seconds: 3
  renew_seconds: 1
notifications:
  # a short timeout: a killed leader's claimed messages go to the next after 4 s
  timeout_seconds: 1
  channels:
    - {{name: ops, kind: webhook, url: "{{hook}}", digest_interval_seconds: 0,
       rate_per_minute: 600}}
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


def release_idle_open(url: str, replica: CollectorProcess) -> None:
    """Wait until the leader has opened a release_idle recommendation (a stuck job's)."""
    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(url) as conn:
            open_ = conn.execute(
                "SELECT count(*) FROM recommendations WHERE kind = 'release_idle'"
            ).fetchone()
        if open_ and open_[0]:
            return
        if time.monotonic() > deadline:
            gpus = httpx.get(replica.url + "/v1/fleet", headers=AUTH, timeout=10).json()["gpus"]
            raise AssertionError(
                (
                    "no release_idle recommendation opened",
                    time.time(),
                    [
                        (g["state"], g.get("idle_since"), g.get("last_seen"), g.get("workloads"))
                        for g in gpus
                    ],
                )
            )
        time.sleep(0.2)


def alert(replicas: list[CollectorProcess], tick: int) -> None:
    """One firing alert, to the first live replica from ``tick``'s; any replica stores
    it in the outbox, the leader of the moment sends it."""
    firing = {"status": "firing", "labels": {"alertname": "Tick", "n": str(tick)},
              "startsAt": "2026-01-01T00:00:00Z"}  # fmt: skip
    body = {"version": "4", "status": "firing", "alerts": [firing]}
    for i in range(len(replicas)):
        replica = replicas[(tick + i) % len(replicas)]
        if replica.proc is None or replica.proc.poll() is not None:
            continue
        try:
            answer = httpx.post(replica.url + "/v1/alertmanager", json=body, headers=AUTH,
                                timeout=10)  # fmt: skip
        except httpx.HTTPError:
            continue
        assert answer.status_code == 200, answer.text
        return
    raise AssertionError("no replica took the alert")


def stream(clock: SimClock, agents: list[Agent], replicas: list[CollectorProcess],
           url: str) -> tuple[list[int], float]:  # fmt: skip
    """Sample and ship the whole history; returns the replicas killed, in order, and the
    wall time of the first kill."""
    start, killed, first_kill_at = clock(), [], 0.0
    for tick in range(TICKS + 1):
        clock.set(start + tick * STEP_SECONDS)
        for agent in agents:
            agent.sampler.tick()
        if tick % SHIP_EVERY_TICKS == 0:
            flush(agents)
        if tick % ALERT_EVERY_TICKS == 0:
            alert(replicas, tick)
        if tick == KILL_LEADER_AT:
            release_idle_open(url, replicas[0])
            killed.append(leader_of(url, replicas))
            first_kill_at = time.time()
            replicas[killed[0]].kill()
        if tick == KILL_OTHER_AT:
            killed.append((killed[0] + 1) % len(replicas))
            replicas[killed[1]].kill()
        if tick in (RESTART_LEADER_AT, RESTART_OTHER_AT):
            replicas[killed[-1]].start()
    return killed, first_kill_at


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
    window (30 s) and the commit interval: the dead replicas' shards were taken over. How
    soon is not the point (a loaded 2-core machine with three collectors and PostgreSQL
    took over 15 s to restore a taken-over shard's backlog), so the wait is generous."""
    deadline = time.monotonic() + 45
    while True:
        with Ledger.open(url) as ledger:
            cursors = {c.gpu_uuid: c.applied_until for c in ledger.cursors().values()}
        if set(cursors) == uuids and min(cursors.values()) >= now - 30 - 3 * STEP_SECONDS:
            return
        missing = sorted(uuids - set(cursors))
        behind = sorted(u for u, t in cursors.items() if t < now - 30 - 3 * STEP_SECONDS)
        assert time.monotonic() < deadline, (missing, behind, sorted(cursors.values())[:3], now)
        time.sleep(0.5)


def scrape(replica: CollectorProcess) -> dict[str, list[Sample]]:
    body = httpx.get(replica.url + "/metrics", headers=AUTH, timeout=10).raise_for_status()
    return {f.name: f.samples for f in text_string_to_metric_families(body.text)}


def metrics_count_once(replicas: list[CollectorProcess], uuids: set[str]) -> None:
    """Summed over the replicas, /metrics counts each GPU once: its per-GPU series come
    from its shard's owner, the fleet's from the leader; each replica says its leases."""
    deadline = time.monotonic() + 10
    while True:
        scraped = [scrape(r) for r in replicas]
        per_gpu = Counter(
            s.labels["uuid"] for m in scraped for s in m.get("gpufleet_gpu_state", [])
        )
        fleet = sum(s.value for m in scraped for s in m.get("gpufleet_fleet_gpus", []))
        leaders = [m["gpufleet_replica_leader"][0].value for m in scraped]
        shards = sum(m["gpufleet_replica_shards_owned"][0].value for m in scraped)
        ok = per_gpu == Counter(dict.fromkeys(uuids, 1)) and fleet == len(uuids)
        if ok and sorted(leaders) == [0, 0, 1] and shards == 64:
            break
        assert time.monotonic() < deadline, (per_gpu, fleet, leaders, shards)
        time.sleep(0.5)
    workloads = [m.get("gpufleet_workload_energy_joules", []) for m in scraped]
    assert sorted(bool(w) for w in workloads) == [False, False, True]  # the leader's


def outbox_rows(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT event_key, state FROM notify_outbox").fetchall()


def outbox_and_recommendations(url: str) -> tuple[list[tuple[str, str]], list[Any]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT event_key, state FROM notify_outbox").fetchall()
        recs = conn.execute("SELECT id, kind, opened_at FROM recommendations").fetchall()
    return rows, recs


def unanswered_sends(logs: list[Path]) -> int:
    """The sends the replicas saw fail in transport (a timeout: the service may have
    taken the message all the same), from their logs."""
    lines = (line for log in logs if log.exists() for line in log.read_text().splitlines())
    return sum(1 for line in lines if "notification channel" in line and "retrying in" in line)


def notified_once(
    url: str, hook: FakeService, first_kill_at: float, kills: int, logs: list[Path]
) -> None:
    """Every outbox row (an alert every few ticks, across both kills, the leader's
    first) was sent and arrived, nothing else arrived; so did each announced
    recommendation's "opened" event, and release_idle ones opened before the leader was
    killed. Each arrived once, but where its sender never saw the service's answer (killed
    meanwhile, or timed out): then again under the same webhook-id, and no more often
    than the kills and failed sends explain. The leader keeps evaluating meanwhile, so the
    outbox is read again after the chat server: what arrived is a subset of it."""
    deadline = time.monotonic() + 30
    while True:
        rows, recs = outbox_and_recommendations(url)
        keys = {key.split("|")[0] for key, _ in rows if key.split("|")[1] == "opened"}
        announced = {rid for rid, kind, _ in recs if kind in ("release_idle", "scale_down")}
        if rows and all(state == "sent" for _, state in rows) and announced <= keys:
            break
        assert time.monotonic() < deadline, (Counter(s for _, s in rows), announced - keys)
        time.sleep(0.5)
    accepted = hook.accepted
    arrived = Counter(key for r in accepted for key in r.json["data"]["events"])
    after, _ = outbox_and_recommendations(url)
    assert all(arrived[key] >= 1 for key, _ in rows)  # every sent row...
    assert set(arrived) <= {key for key, _ in after}  # ...and nothing else
    # once, but for a send whose answer its sender never saw: a leader killed between the
    # service taking a message and its row marked sent, or a send that timed out; then
    # the message came again under the same webhook-id, which a receiver drops
    ids: dict[str, set[str]] = {}
    for r in accepted:
        for key in r.json["data"]["events"]:
            ids.setdefault(key, set()).add(r.headers["webhook-id"])
    assert all(len(found) == 1 for found in ids.values()), ids
    repeats = sum(n - 1 for n in arrived.values())
    explained = kills + unanswered_sends(logs)
    assert repeats <= explained, (repeats, explained, hook.unanswered, arrived.most_common(3))
    opened = Counter(key.split("|")[0] for key in arrived if key.split("|")[1] == "opened")
    assert set(opened) >= announced
    early = {rid for rid, kind, at in recs if kind == "release_idle" and at < first_kill_at}
    assert early, recs  # open while the first leader led, announced once across both kills
    assert sum(1 for key in arrived if key.startswith("am|")) == TICKS // ALERT_EVERY_TICKS + 1


def test_three_replicas_with_two_kill_9_count_everything_once(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    start = time.time() - HISTORY_SECONDS
    fleet = build_fleet(start_time=start)
    clock = SimClock(start)
    config = tmp_path / "collector.yaml"
    hook = FakeService("webhook")
    config.write_text(CONFIG.replace("{hook}", hook.url))
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
        killed, first_kill_at = stream(clock, agents, replicas, url)
        drain(agents)
        applied_by_replicas(url, set(fleet.gpu_uuids), clock())
        same_fleet_everywhere(replicas, set(fleet.gpu_uuids))
        metrics_count_once(replicas, set(fleet.gpu_uuids))
        notified_once(url, hook, first_kill_at, len(killed), [r.log for r in replicas])
        for replica in replicas:
            replica.terminate()
    finally:
        for replica in replicas:
            replica.stop_if_running()
        for agent in agents:
            agent.shipper.close()
        hook.close()
    assert len(set(killed)) == 2  # two different replicas, the leader first
    assert all(a.stats.snapshot().spool_dropped_batches_total == 0 for a in agents)
    apply_the_rest(config, url)  # type: ignore[arg-type]
    with Ledger.open(url) as ledger:
        assert not ledger.pending_batches()
    check_against_truth(fleet, url, start, clock())  # type: ignore[arg-type]
