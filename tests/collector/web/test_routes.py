"""The console's routes in the real collector (build_collector with a SQLite ledger):
pages, static files, the series and usage routes, auth; in-process through AsgiClient."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.model import encode_batch
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from gpufleet.cli.collector import Collector, build_collector
from tests.collector.http.test_app_fake import NOW, AsgiClient, make_batch
from tests.paths import REPO

TOKEN = "console-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}
PAGES = ["/ui/", "/ui/idle", "/ui/recommendations", "/ui/workload?key=x", "/ui/energy", "/ui/plans",
         "/ui/savings"]  # fmt: skip


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    settings = CollectorSettings(
        server=ServerSettings(tokens=[TOKEN]), ledger=LedgerSettings(url=str(tmp_path / "l.db"))
    )
    built = build_collector(settings, clock=lambda: NOW + 120, tokens=frozenset([TOKEN]))
    yield built
    built.ledger.close()


def post(client: AsgiClient, seq: int, at: float, **fields: object) -> None:
    batch = make_batch(seq=seq, at=at, **fields)
    assert client.post("/v1/batches", content=encode_batch(batch), headers=JSON).status_code == 200


def test_pages_are_open_shells_without_figures_or_secrets(collector: Collector) -> None:
    client = AsgiClient(collector.app)
    for path in PAGES:
        response = client.get(path)
        assert response.status_code == 200, path
        assert "default-src 'self'" in response.headers["content-security-policy"]
        assert 'src="/ui/static/console.js"' in response.text
        assert TOKEN not in response.text
        assert "http://" not in response.text and "https://" not in response.text  # no CDN
    assert client.get("/").headers["location"] == "/ui/"
    assert 'data-anonymous="false"' in client.get("/ui/").text


def test_an_unknown_console_path_is_the_consoles_own_not_found_page(collector: Collector) -> None:
    """It used to answer the API's raw JSON 404."""
    client = AsgiClient(collector.app)
    for path in ("/ui/nodes", "/ui/fleet/gpu-node-1", "/ui/idle/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html")
        assert 'data-page="notfound"' in response.text
    assert 'data-page="idle"' in client.get("/ui/idle").text


def test_static_files_are_served_from_the_package_and_nothing_else(collector: Collector) -> None:
    client = AsgiClient(collector.app)
    static = REPO / "collector" / "web" / "static"
    for path in sorted(static.iterdir()):
        if path.suffix in (".js", ".css", ".svg"):
            response = client.get(f"/ui/static/{path.name}")
            assert response.status_code == 200, path.name
            assert response.text == path.read_text(encoding="utf-8")
            urls = set(re.findall(r"https?://[^\s\"'`]+", response.text))
            assert urls <= {"http://www.w3.org/2000/svg"}, path.name  # nothing from the network
    for name in ("console.html", "..%2Froutes.py", "nope.js", "series.py"):
        assert client.get(f"/ui/static/{name}").status_code == 404, name


def test_series_route_returns_minute_buckets_of_ingested_samples(collector: Collector) -> None:
    client = AsgiClient(collector.app)
    post(client, 1, NOW, sm_activity=0.2, power_watts=100.0, memory_used_bytes=5 * 2**30)
    post(client, 2, NOW + 30, sm_activity=0.6, power_watts=300.0, memory_used_bytes=7 * 2**30)
    post(client, 2, NOW + 30, sm_activity=0.6, power_watts=300.0)  # a resent batch: no double
    post(client, 3, NOW + 60, sm_activity=1.0, power_watts=500.0)
    response = client.get("/v1/gpus/GPU-node-a-0/series", headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["resolution_seconds"] == 60.0
    assert body["start"] == NOW + 120 - 6 * 3600  # default window: the retention
    first, second = body["points"]
    assert (first["start"], first["samples"]) == (NOW, 2)
    assert first["sm_activity"] == pytest.approx(0.4)
    assert first["power_watts"] == pytest.approx(200.0)
    assert first["memory_used_bytes"] == 7 * 2**30
    assert (second["start"], second["samples"], second["power_watts"]) == (NOW + 60, 1, 500.0)
    query = {"start": NOW + 1, "end": NOW + 61}
    window = client.get("/v1/gpus/GPU-node-a-0/series", params=query, headers=AUTH).json()
    assert [p["start"] for p in window["points"]] == [NOW + 60]


def test_series_route_404s_an_unknown_gpu_and_422s_a_bad_window(collector: Collector) -> None:
    client = AsgiClient(collector.app)
    missing = client.get("/v1/gpus/GPU-none/series", headers=AUTH)
    assert (missing.status_code, missing.json()["field"]) == (404, "uuid")
    bad = client.get("/v1/gpus/GPU-none/series?start=soon", headers=AUTH)
    assert (bad.status_code, bad.json()["field"]) == (422, "start")


def test_gpu_usage_route_lists_every_gpu_with_price_and_hourly_usage(
    collector: Collector,
) -> None:
    client = AsgiClient(collector.app)
    for seq in range(1, 8):  # idle H100s held by a pod, one sample every 10 s
        post(client, seq, NOW + 10 * (seq - 1), sm_activity=0.0, energy_joules=1.0e6 + seq * 700)
    collector.core.applier.tick(flush=True)
    body = client.get(f"/v1/gpus/usage?start={NOW}&end={NOW + 3600}", headers=AUTH).json()
    price = collector.core.service.rates.price_per_gpu_hour("H100", "node-a")
    assert price > 0 and body["currency"] == collector.core.service.rates.currency
    assert [g["uuid"] for g in body["gpus"]] == ["GPU-node-a-0", "GPU-node-a-1"]
    for gpu in body["gpus"]:
        assert (gpu["model"], gpu["node"], gpu["price_per_hour"]) == ("H100", "node-a", price)
        assert gpu["usage"]["idle_seconds"] == pytest.approx(60.0)  # 6 intervals of 10 s
        assert gpu["usage"]["idle_cost"] == pytest.approx(price * 60 / 3600)
        assert gpu["usage"]["energy_joules"] == pytest.approx(6 * 700.0)


def test_trend_route_gives_the_fleet_hour_by_hour_from_the_rollups(collector: Collector) -> None:
    """Two H100s active for 40 s, then idle for 20 s (an interval takes its starting
    sample's activity), all in the hour from NOW: utilisation 2/3, the idle 40 GPU-seconds'
    cost as waste; the hours before and after have no rows."""
    client = AsgiClient(collector.app)
    for seq in range(1, 8):
        busy = seq <= 4
        post(client, seq, NOW + 10 * (seq - 1), sm_activity=0.6 if busy else 0.0)
    collector.core.applier.tick(flush=True)
    answer = client.get(f"/v1/fleet/trend?start={NOW - 7200}&end={NOW + 7200}", headers=AUTH)
    body = answer.json()
    price = collector.core.service.rates.price_per_gpu_hour("H100", "node-a")
    assert body["currency"] == collector.core.service.rates.currency
    [hour] = body["hours"]
    assert hour["hour_start"] == NOW
    assert hour["utilisation_ratio"] == pytest.approx(2 / 3)
    assert hour["active_gpu_hours"] == pytest.approx(2 * 40 / 3600)
    assert hour["idle_gpu_hours"] == pytest.approx(2 * 20 / 3600)
    assert hour["idle_cost"] == pytest.approx(price * 2 * 20 / 3600)
    before = client.get(f"/v1/fleet/trend?start={NOW - 7200}&end={NOW}", headers=AUTH).json()
    assert before["hours"] == []
    bad = client.get("/v1/fleet/trend?start=later", headers=AUTH)
    assert (bad.status_code, bad.json()["field"]) == (422, "start")
    assert client.get("/v1/fleet/trend").status_code == 401


def test_console_api_routes_need_the_token(collector: Collector) -> None:
    client = AsgiClient(collector.app)
    for path in ("/v1/gpus/usage", "/v1/gpus/GPU-x/series"):
        response = client.get(path)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Bearer realm="gpufleet"'
        wrong = client.get(path, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "invalid_token" in wrong.headers["www-authenticate"]
        assert TOKEN not in wrong.text
