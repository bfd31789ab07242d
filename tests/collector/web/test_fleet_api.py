"""``/v1/fleet/summary`` and ``/v1/gpus/usage`` pages in the real collector (build_collector
with a SQLite ledger), in-process through AsgiClient; figures against the price book."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.model import encode_batch
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from gpufleet.cli.collector import Collector, build_collector
from tests.collector.http.test_app_fake import NOW, AsgiClient, make_batch

TOKEN = "console-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}
#: node -> SM activity of its GPUs (0: idle, held by the batch's pod)
NODES = {"gpu-node-10": 0.0, "gpu-node-1": 0.7, "gpu-node-2": 0.0}


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    settings = CollectorSettings(
        server=ServerSettings(tokens=[TOKEN]), ledger=LedgerSettings(url=str(tmp_path / "l.db"))
    )
    built = build_collector(settings, clock=lambda: NOW + 120, tokens=frozenset([TOKEN]))
    client = AsgiClient(built.app)
    for node, activity in NODES.items():
        batch = make_batch(node=node, at=NOW + 100, sm_activity=activity, dram_activity=0.0)
        response = client.post("/v1/batches", content=encode_batch(batch), headers=JSON)
        assert response.status_code == 200
    yield built
    built.ledger.close()


def test_the_summary_lists_nodes_by_waste_then_natural_name_without_gpus(
    collector: Collector,
) -> None:
    client = AsgiClient(collector.app)
    response = client.get("/v1/fleet/summary", headers=AUTH)
    body = response.json()
    price = collector.core.service.rates.price_per_gpu_hour("H100", "gpu-node-2")
    assert price > 0
    assert [n["node"] for n in body["nodes"]] == ["gpu-node-2", "gpu-node-10", "gpu-node-1"]
    two, ten, one = body["nodes"]
    assert two["waste_per_hour"] == ten["waste_per_hour"] == pytest.approx(2 * price)
    assert one["waste_per_hour"] == 0.0
    assert two["gpus_by_state"] == {"active": 0, "allocated_idle": 2, "unallocated": 0,
                                    "unknown": 0}  # fmt: skip
    assert (one["gpus"], one["models"], one["healthy"]) == (2, ["H100"], True)
    assert body["waste_per_hour"] == pytest.approx(4 * price)
    assert body["summary"]["gpus_by_state"]["allocated_idle"] == 4
    assert body["currency"] == collector.core.service.rates.currency
    assert "gpus" not in body
    again = client.get(
        "/v1/fleet/summary", headers={**AUTH, "If-None-Match": response.headers["etag"]}
    )
    assert again.status_code == 304


def test_usage_to_now_reads_the_ledger_once_per_hour_and_commit(tmp_path: Path) -> None:
    """A window ending "now" (the default, and the console's "today") used to read every
    GPU's hourly rows on each request, because "now" moved: the rows of [start, end) are
    the same for any end within one hour while the ledger is unchanged."""
    now = [NOW + 120]
    settings = CollectorSettings(
        server=ServerSettings(tokens=[TOKEN]), ledger=LedgerSettings(url=str(tmp_path / "l.db"))
    )
    built = build_collector(settings, clock=lambda: now[0], tokens=frozenset([TOKEN]))
    client = AsgiClient(built.app)
    seen: list[str] = []
    built.ledger.engine._reader.set_trace_callback(seen.append)
    reads = lambda: [s for s in seen if "gpu_usage_hourly" in s]  # noqa: E731
    first = client.get("/v1/gpus/usage?limit=1", headers=AUTH).json()
    now[0] += 30  # within the same hour (NOW is a whole hour)
    second = client.get("/v1/gpus/usage?limit=1", headers=AUTH).json()
    assert len(reads()) == 1 and first["usage"] == second["usage"]
    assert second["end"] == now[0]  # the answer still says the window asked
    built.ledger.close()


def test_gpu_usage_pages_by_node_with_an_etag(collector: Collector) -> None:
    client = AsgiClient(collector.app)
    first = client.get("/v1/gpus/usage?node=gpu-node-10&limit=1", headers=AUTH)
    body = first.json()
    assert [g["uuid"] for g in body["gpus"]] == ["GPU-gpu-node-10-0"] and body["total"] == 2
    rest = client.get(f"/v1/gpus/usage?node=gpu-node-10&cursor={body['next_cursor']}",
                      headers=AUTH).json()  # fmt: skip
    assert [g["uuid"] for g in rest["gpus"]] == ["GPU-gpu-node-10-1"]
    assert rest["next_cursor"] is None
    same = client.get("/v1/gpus/usage?node=gpu-node-10&limit=1",
                      headers={**AUTH, "If-None-Match": first.headers["etag"]})  # fmt: skip
    assert same.status_code == 304
    whole = client.get("/v1/gpus/usage", headers=AUTH).json()
    assert len(whole["gpus"]) == 6 and "total" not in whole
    bad = client.get("/v1/gpus/usage?cursor=zz", headers=AUTH)
    assert (bad.status_code, bad.json()["field"]) == (422, "cursor")


def test_a_gpu_usage_page_sums_the_usage_of_every_matching_gpu(collector: Collector) -> None:
    client = AsgiClient(collector.app)
    for node in ("gpu-node-2", "gpu-node-10"):  # 10 s more idle on each of their 4 GPUs
        batch = make_batch(node=node, seq=2, at=NOW + 110, sm_activity=0.0, dram_activity=0.0)
        assert client.post("/v1/batches", content=encode_batch(batch), headers=JSON).is_success
    collector.core.applier.tick(flush=True)
    query = {"state": "allocated_idle", "limit": 1, "start": NOW, "end": NOW + 3600}
    body = client.get("/v1/gpus/usage", params=query, headers=AUTH).json()
    assert (len(body["gpus"]), body["total"]) == (1, 4)
    price = collector.core.service.rates.price_per_gpu_hour("H100", "gpu-node-2")
    assert body["usage"]["idle_seconds"] == pytest.approx(4 * 10.0)
    assert body["usage"]["idle_cost"] == pytest.approx(4 * 10.0 * price / 3600)
    on_one = client.get("/v1/gpus/usage", params={**query, "node": "gpu-node-1"}, headers=AUTH)
    assert on_one.json()["usage"]["idle_seconds"] == 0.0  # active node: nothing matches


def test_the_summary_needs_the_token(collector: Collector) -> None:
    assert AsgiClient(collector.app).get("/v1/fleet/summary").status_code == 401
