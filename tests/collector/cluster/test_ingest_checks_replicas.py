"""Ingest's fleet checks hold on replicas as on one collector, whichever replica a node
posts to. The front that accepts a batch buffers nothing (its shard's owner applies it), so
it judges by the fleet the owners published: a GPU uuid claimed by a second node is
refused (409 naming both nodes), and the fleet's GPU bound counts every owner's GPUs; and
its bounded values (workloads, label values) are forgotten as one collector's are.
Before: a replica took every clone's batch (the two shards' owners billed one board
twice), never refused a GPU past ``ingest.max_gpus``, and never forgot a workload, so
past ``ingest.max_workloads`` over its lifetime every new one was refused with 429.

Two real ``gpufleet collector`` replicas in this process (``build_collector``, HTTP on
loopback) on one PostgreSQL; their appliers ticked by hand on a fixed clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from collector.cluster.settings import ClusterSettings
from collector.config import CollectorSettings, IngestSettings, LedgerSettings, ServerSettings
from gpufleet.cli.collector import Collector, build_collector, serve
from tests.collector.bounds_rig import Clock, node_body
from tests.collector.cluster.rig import Database
from tests.collector.test_core import T0
from tests.collector.test_duplicate_gpu import GPU, node_batch
from tests.e2e.fleet_rig import free_port

TOKEN = "replica-dup-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
NOW = T0 + 3700
FORGET = 600.0


@contextmanager
def two_replicas(
    db: Database, clock: Clock, ingest: IngestSettings | None = None
) -> Iterator[list[tuple[Collector, httpx.Client]]]:
    running: list[tuple[Collector, httpx.Client, uvicorn.Server]] = []
    try:
        for _ in range(2):
            port = free_port()
            settings = CollectorSettings(
                server=ServerSettings(port=port, tokens=[TOKEN]),
                ledger=LedgerSettings(url=db.url),
                ingest=ingest or IngestSettings(),
                cluster=ClusterSettings(enabled=True, lease_seconds=3, renew_seconds=1),
            )
            collector = build_collector(settings, clock, tokens=frozenset([TOKEN]))
            server = serve(collector)
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
            running.append((collector, client, server))
        yield [(c, h) for c, h, _ in running]
    finally:
        for collector, client, server in running:
            client.close()
            server.should_exit = True
            collector.stop()


@pytest.fixture
def replicas(db: Database) -> Iterator[list[tuple[Collector, httpx.Client]]]:
    with two_replicas(db, Clock(NOW)) as running:
        yield running


def tick_all(replicas: list[tuple[Collector, httpx.Client]]) -> None:
    """Every replica applies, publishes and reads what the others published."""
    for _ in range(2):
        for collector, _client in replicas:
            collector.core.applier.tick(flush=True, commit=True)


def published(db: Database) -> dict[str, str]:
    with db.connect() as conn:
        return dict(conn.execute("SELECT uuid, node FROM live_gpus").fetchall())


def test_a_clone_is_refused_by_every_replica_and_the_first_node_keeps_its_gpu(
    replicas: list[tuple[Collector, httpx.Client]], db: Database, tmp_path: Path
) -> None:
    (_, first), (_, second) = replicas
    taken = first.post("/v1/batches", content=node_batch("node-a", 1, range(0, 301, 10)),
                       headers=AUTH)  # fmt: skip
    assert taken.status_code == 200, taken.text
    tick_all(replicas)
    assert published(db) == {GPU.uuid: "node-a"}

    for client in (second, first):  # the other replica, and the one node-a posted to
        clone = client.post("/v1/batches", content=node_batch("node-b", 1, range(0, 301, 10)),
                            headers=AUTH)  # fmt: skip
        assert clone.status_code == 409, clone.text
        error = clone.json()
        assert error["reason"] == "duplicate_gpu" and error["field"] == "$.gpus[0].uuid"
        assert "node-a" in error["error"] and "node-b" in error["error"]

    again = second.post("/v1/batches", content=node_batch("node-a", 2, range(310, 601, 10)),
                        headers=AUTH)  # fmt: skip
    assert again.status_code == 200, again.text  # its own node, through any replica
    tick_all(replicas)
    assert published(db) == {GPU.uuid: "node-a"}
    fleet = second.get("/v1/fleet", headers=AUTH).json()
    claims = {(d["uuid"], d["node"], d["claimed_by"]) for d in fleet["duplicate_gpus"]}
    assert claims == {(GPU.uuid, "node-a", "node-b")}


def post(replica: tuple[Collector, httpx.Client], body: bytes) -> httpx.Response:
    return replica[1].post("/v1/batches", content=body, headers=AUTH)


def test_the_fleet_s_gpu_bound_counts_every_owner_s_gpus(db: Database) -> None:
    """test_bounds.py's full fleet, each node through either replica."""
    clock = Clock(T0 + 10)
    ingest = IngestSettings(forget_after_seconds=FORGET, max_gpus=16)
    with two_replicas(db, clock, ingest) as (one, other):
        assert post(one, node_body("old", 8, 1, T0)).status_code == 200
        assert post(other, node_body("kept", 8, 1, T0)).status_code == 200
        tick_all([one, other])
        for replica in (one, other):
            refused = post(replica, node_body("new", 8, 1, T0 + 5))
            assert refused.status_code == 429, refused.text
            assert "ingest.max_gpus" in refused.json()["error"]
            assert "24" in refused.json()["error"]  # what the fleet would have been

        clock.now = T0 + 10 + FORGET + 1  # "old" has been silent past forget_after
        assert post(other, node_body("kept", 8, 2, clock.now - 5)).status_code == 200
        tick_all([one, other])  # its owner forgets it, and no longer publishes it
        assert set(published(db).values()) == {"kept"}
        accepted = post(one, node_body("new", 8, 1, clock.now - 5))
        assert accepted.status_code == 200, accepted.text


def test_a_replica_forgets_workloads_unseen_for_forget_after_as_one_collector_does(
    db: Database,
) -> None:
    clock = Clock(T0 + 10)
    ingest = IngestSettings(forget_after_seconds=FORGET, max_workloads=2)
    with two_replicas(db, clock, ingest) as (one, other):
        for i in range(2):
            taken = post(one, node_body(f"n{i}", 1, 1, T0, pod=f"pod-{i}"))
            assert taken.status_code == 200, taken.text
        refused = post(one, node_body("n2", 1, 1, T0 + 5, pod="pod-2"))
        assert refused.status_code == 429 and "ingest.max_workloads" in refused.json()["error"]

        clock.now = T0 + 10 + FORGET + 1  # pod-0 and pod-1 unseen past forget_after
        tick_all([one, other])
        accepted = post(one, node_body("n2", 1, 1, clock.now - 5, pod="pod-2"))
        assert accepted.status_code == 200, accepted.text
