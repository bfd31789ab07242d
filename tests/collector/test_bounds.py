"""The live fleet's memory bounds and forgetting, over real HTTP against a real core with a
clock the test moves: a batch past a bound is refused whole (naming the bound and the
setting), nothing of it stored; GPUs silent for ``ingest.forget_after_seconds`` leave the
live fleet and /metrics, and a restart does not bring them back, while their ledger
history stays."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

from collector.config import CollectorSettings, IngestSettings
from tests.collector.bounds_rig import HEADERS, node_body, rig
from tests.collector.test_core import T0

FORGET = 600.0


def bounded(**ingest: object) -> CollectorSettings:
    base = IngestSettings(forget_after_seconds=FORGET)
    return CollectorSettings(ingest=replace(base, **ingest))  # type: ignore[arg-type]


def test_a_body_with_25000_new_gpu_uuids_is_refused_naming_the_limit(tmp_path: Path) -> None:
    """25,000 uuids pass the wire's ceiling (the rule table: 1,024 GPUs a batch, refused as
    it decodes); 1,000 pass the wire but not the node's bound (ingest.max_gpus_per_node).
    Either is refused whole, naming the bound, and nothing of it is taken."""
    with rig(tmp_path / "ledger.db", CollectorSettings(), T0 + 10) as r:
        assert r.post(node_body("n1", 8, 1, T0)).status_code == 200
        body = gzip.compress(node_body("n1", 25_000, 2, T0 + 1))
        assert len(body) < 400_000  # a small body, as an attacker would send it
        response = r.http.post("/v1/batches", content=body,
                               headers={**HEADERS, "Content-Encoding": "gzip"})  # fmt: skip
        assert response.status_code == 422, response.text
        assert response.json()["field"] == "$.gpus"
        assert "at most 1024 GPUs" in response.json()["error"]
        body = gzip.compress(node_body("n1", 1_000, 3, T0 + 1))
        response = r.http.post("/v1/batches", content=body,
                               headers={**HEADERS, "Content-Encoding": "gzip"})  # fmt: skip
        assert response.status_code == 422, response.text
        error = response.json()
        assert error["reason"] == "limit_exceeded"
        assert "ingest.max_gpus_per_node" in error["error"] and "1000" in error["error"]
        assert error["field"] == "$.gpus[64]"
        assert r.fleet_nodes() == {"n1": 8}  # nothing of either was taken
        assert len(r.core.ledger.pending_batches()) == 1  # the first batch alone was stored
        metrics = r.http.get("/metrics").text
        assert 'gpufleet_collector_rejected_batches_total{reason="limit_exceeded"} 1.0' in metrics
        assert 'gpufleet_collector_rejected_batches_total{reason="invalid_value"} 1.0' in metrics


def test_a_full_fleet_answers_429_until_silent_gpus_are_forgotten(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with rig(db, bounded(max_gpus=16), T0 + 10) as r:
        assert r.post(node_body("old", 8, 1, T0)).status_code == 200
        assert r.post(node_body("kept", 8, 1, T0)).status_code == 200
        refused = r.post(node_body("new", 8, 1, T0 + 5))
        assert refused.status_code == 429, refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 3600
        assert "ingest.max_gpus" in refused.json()["error"]
        assert "24" in refused.json()["error"]  # what the fleet would have been
        assert r.fleet_nodes() == {"old": 8, "kept": 8}

        r.clock.now = T0 + 10 + FORGET + 1  # "old" has been silent past forget_after
        assert r.post(node_body("kept", 8, 2, r.clock.now - 5)).status_code == 200
        r.core.applier.tick()
        assert r.fleet_nodes() == {"kept": 8}
        metrics = r.http.get("/metrics").text
        assert 'node="old"' not in metrics and 'node="kept"' in metrics
        assert "old" not in r.http.get("/healthz").json()["clock_offsets"]

        accepted = r.post(node_body("new", 8, 1, r.clock.now - 5))
        assert accepted.status_code == 200, accepted.text
        assert r.fleet_nodes() == {"kept": 8, "new": 8}
        r.core.applier.tick(flush=True)
        now = r.clock.now
    with rig(db, bounded(max_gpus=16), now + 1) as restarted:
        # the forgotten node stays forgotten; its hours stay in the ledger
        assert restarted.fleet_nodes() == {"kept": 8, "new": 8}
        nodes = {record.node for record, _ in restarted.core.ledger.usage_totals_by_gpu()}
        assert nodes == {"old", "kept", "new"}


def test_a_new_label_value_past_the_limit_is_429_naming_the_label(tmp_path: Path) -> None:
    with rig(tmp_path / "ledger.db", bounded(max_label_values=2), T0 + 10) as r:
        assert r.post(node_body("a", 1, 1, T0, region="DEU")).status_code == 200
        assert r.post(node_body("b", 1, 1, T0, region="FRA")).status_code == 200
        assert r.post(node_body("c", 1, 1, T0, region="DEU")).status_code == 200
        refused = r.post(node_body("d", 1, 1, T0, region="made-up-0001"))
        assert refused.status_code == 429
        assert "'region'" in refused.json()["error"]
        assert "ingest.max_label_values" in refused.json()["error"]
        assert r.fleet_nodes() == {"a": 1, "b": 1, "c": 1}


def test_new_workloads_past_the_limit_are_429(tmp_path: Path) -> None:
    with rig(tmp_path / "ledger.db", bounded(max_workloads=2), T0 + 10) as r:
        for i in range(2):
            assert r.post(node_body(f"n{i}", 1, 1, T0, pod=f"pod-{i}")).status_code == 200
        refused = r.post(node_body("n2", 1, 1, T0, pod="pod-2"))
        assert refused.status_code == 429
        assert "ingest.max_workloads" in refused.json()["error"]
        assert r.fleet_nodes() == {"n0": 1, "n1": 1}
