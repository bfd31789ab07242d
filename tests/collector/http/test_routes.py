"""The read routes, dismissal and the published documents, through Starlette's AsgiClient."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from agent.model import SCHEMA_VERSION
from collector.backend import WorkloadReport
from collector.config import CollectorSettings, ServerSettings
from collector.http.app import create_app
from collector.records import (
    GpuState,
    GpuView,
    RecommendationKind,
    RecommendationStatus,
    Usage,
    WorkloadRef,
)
from tests.collector.http.test_app_fake import NOW, AsgiClient, FakeBackend, make_recommendation

TOKEN = "read-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POD = WorkloadRef(key="pod:ml/notebook-7", kind="kubernetes_pod", name="notebook-7",
                  namespace="ml", team="vision")  # fmt: skip


@pytest.fixture
def backend() -> FakeBackend:
    views = [
        GpuView(uuid="GPU-1", node="n1", index=0, model="H100", name="NVIDIA H100",
                state=GpuState.ALLOCATED_IDLE, last_seen=NOW - 1, workloads=(POD,),
                idle_since=NOW - 600, sm_activity=0.0, power_watts=70.0),
        GpuView(uuid="GPU-2", node="n1", index=1, model="H100", name="NVIDIA H100",
                state=GpuState.ACTIVE, last_seen=NOW - 1, sm_activity=0.9, power_watts=650.0),
        GpuView(uuid="GPU-3", node="n2", index=0, model="L4", name="NVIDIA L4",
                state=GpuState.UNKNOWN, last_seen=NOW - 900, sm_activity=0.5, power_watts=50.0),
    ]  # fmt: skip
    usage = Usage(active_seconds=3600.0, idle_seconds=1800.0, energy_joules=2.0e6,
                  idle_cost=4.5, carbon_grams=250.0)  # fmt: skip
    report = WorkloadReport(key=POD.key, kind=POD.kind, name=POD.name, namespace="ml",
                            team="vision", user="", currency="CNY", usage=usage,
                            gpu_models=("H100",), idle_episodes=2,
                            longest_idle_seconds=1200.0)  # fmt: skip
    recs = {
        "r1": make_recommendation("r1", RecommendationKind.RELEASE_IDLE, 900.0),
        "r2": make_recommendation("r2", RecommendationKind.SCALE_DOWN, 300.0),
    }
    return FakeBackend(views=views, reports=[report], recs=recs)


@pytest.fixture
def client(backend: FakeBackend) -> AsgiClient:
    settings = CollectorSettings(server=ServerSettings())
    return AsgiClient(create_app(backend, settings, [TOKEN], clock=lambda: NOW))


def test_fleet_lists_every_gpu_with_its_state_and_a_summary(client: AsgiClient) -> None:
    body = client.get("/v1/fleet", headers=AUTH).json()
    assert body["now"] == NOW
    assert [(g["uuid"], g["state"]) for g in body["gpus"]] == [
        ("GPU-1", "allocated_idle"), ("GPU-2", "active"), ("GPU-3", "unknown")
    ]  # fmt: skip
    assert body["gpus"][0]["idle_since"] == NOW - 600
    assert body["gpus"][0]["workloads"][0]["key"] == "pod:ml/notebook-7"
    summary = body["summary"]
    assert summary["gpus_by_state"] == {"active": 1, "allocated_idle": 1, "unallocated": 0,
                                        "unknown": 1}  # fmt: skip
    # the unknown L4 is left out: its readings are stale
    assert summary["utilisation_ratio"] == pytest.approx((0.0 + 0.9) / 2)
    assert summary["power_watts"] == pytest.approx(720.0)


def test_workloads_default_to_the_last_24_hours(client: AsgiClient, backend: FakeBackend) -> None:
    body = client.get("/v1/workloads", headers=AUTH).json()
    assert backend.workload_calls == [(NOW - 86400, NOW)]
    assert (body["start"], body["end"]) == (NOW - 86400, NOW)
    [row] = body["workloads"]
    assert (row["key"], row["currency"], row["idle_episodes"]) == ("pod:ml/notebook-7", "CNY", 2)
    assert row["usage"]["idle_cost"] == 4.5
    assert row["longest_idle_seconds"] == 1200.0


@pytest.mark.parametrize(
    ("query", "covered"),
    [  # the ledger keeps hourly totals: the figures cover the hours the range touches
        ("start=2025-12-31T22:15:00Z", (NOW - 7200, NOW)),
        ("start=2025-12-31T20:00:00Z&end=2025-12-31T22:30:00Z", (NOW - 14400, NOW - 3600)),
    ],
)
def test_workloads_state_the_whole_hours_their_figures_cover(
    client: AsgiClient, query: str, covered: tuple[float, float]
) -> None:
    body = client.get(f"/v1/workloads?{query}", headers=AUTH).json()
    assert (body["covered_start"], body["covered_end"]) == covered


@pytest.mark.parametrize(
    ("query", "window"),
    [
        ("start=1767139200&end=1767225600", (1767139200.0, 1767225600.0)),
        ("start=2025-12-31T00:00:00Z&end=2026-01-01T00:00:00Z", (1767139200.0, 1767225600.0)),
        ("start=2025-12-31T08:00:00%2B08:00", (1767139200.0, NOW)),
        ("start=2025-12-31", (1767139200.0, NOW)),
        ("end=1767222000", (1767222000.0 - 86400, 1767222000.0)),
    ],
)
def test_workload_windows_take_unix_seconds_or_iso_8601(
    client: AsgiClient, backend: FakeBackend, query: str, window: tuple[float, float]
) -> None:
    assert client.get(f"/v1/workloads?{query}", headers=AUTH).status_code == 200
    assert backend.workload_calls == [window]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("start=yesterday", "start"),
        ("end=2026-13-01", "end"),
        ("start=nan", "start"),
        ("start=-5", "start"),
        ("start=1767225600&end=1767139200", "start"),
    ],
)
def test_bad_windows_are_422_naming_the_parameter(
    client: AsgiClient, backend: FakeBackend, query: str, field: str
) -> None:
    response = client.get(f"/v1/workloads?{query}", headers=AUTH)
    assert response.status_code == 422
    assert response.json()["field"] == field
    assert backend.workload_calls == []


def test_recommendations_default_to_open_and_notified(
    client: AsgiClient, backend: FakeBackend
) -> None:
    body = client.get("/v1/recommendations", headers=AUTH).json()
    assert body["statuses"] == ["open", "notified"]
    assert [r["id"] for r in body["recommendations"]] == ["r1", "r2"]
    assert body["recommendations"][0]["savings"]["money_per_month"] == 900.0
    assert backend.status_calls == [(RecommendationStatus.OPEN, RecommendationStatus.NOTIFIED)]


def test_recommendation_status_filter(client: AsgiClient, backend: FakeBackend) -> None:
    assert (
        client.get("/v1/recommendations?status=dismissed", headers=AUTH).json()["recommendations"]
        == []
    )
    assert client.get("/v1/recommendations?status=all", headers=AUTH).status_code == 200
    assert backend.status_calls == [(RecommendationStatus.DISMISSED,), tuple(RecommendationStatus)]
    response = client.get("/v1/recommendations?status=open,later", headers=AUTH)
    assert response.status_code == 422
    assert "'later'" in response.json()["error"]


def test_dismissing_a_recommendation(client: AsgiClient, backend: FakeBackend) -> None:
    assert client.post("/v1/recommendations/r1/dismiss").status_code == 401
    missing = client.post("/v1/recommendations/nope/dismiss", headers=AUTH)
    assert (missing.status_code, missing.json()["field"]) == (404, "rec_id")
    done = client.post("/v1/recommendations/r1/dismiss", headers=AUTH)
    assert (done.status_code, done.json()["status"]) == (200, "dismissed")
    assert done.json()["updated_at"] == NOW
    assert backend.recs["r1"].status is RecommendationStatus.DISMISSED


def test_dismissing_a_recommendation_whose_id_holds_a_slash(
    client: AsgiClient, backend: FakeBackend
) -> None:
    """A pod's id is "release_idle:pod:<namespace>/<name>": the console sends the slash
    percent-encoded, and the route must still find the recommendation (it was a 404)."""
    rec_id = "release_idle:pod:ml/notebook-7"
    backend.recs[rec_id] = make_recommendation(rec_id, RecommendationKind.RELEASE_IDLE, 50.0)
    done = client.post("/v1/recommendations/release_idle:pod:ml%2Fnotebook-7/dismiss", headers=AUTH)
    assert (done.status_code, done.json()["id"]) == (200, rec_id)
    assert backend.recs[rec_id].status is RecommendationStatus.DISMISSED


def test_restoring_a_dismissed_recommendation_undoes_the_dismissal(
    client: AsgiClient, backend: FakeBackend
) -> None:
    rec_id = "release_idle:pod:ml/notebook-7"
    backend.recs[rec_id] = make_recommendation(rec_id, RecommendationKind.RELEASE_IDLE, 50.0)
    path = "/v1/recommendations/release_idle:pod:ml%2Fnotebook-7"
    assert client.post(path + "/restore").status_code == 401
    assert client.post(path + "/dismiss", headers=AUTH).json()["status"] == "dismissed"
    done = client.post(path + "/restore", headers=AUTH)
    assert (done.status_code, done.json()["id"], done.json()["status"]) == (200, rec_id, "open")
    assert backend.recs[rec_id].status is RecommendationStatus.OPEN
    missing = client.post("/v1/recommendations/nope/restore", headers=AUTH)
    assert (missing.status_code, missing.json()["field"]) == (404, "rec_id")


def test_get_on_the_ingest_route_is_405_json(client: AsgiClient) -> None:
    response = client.get("/v1/batches", headers=AUTH)
    assert response.status_code == 405
    assert response.json()["error"] == "Method Not Allowed"


def test_the_openapi_document_is_valid_and_lists_every_route(client: AsgiClient) -> None:
    document = client.get("/openapi.json").json()
    validate(document)  # raises on an invalid OpenAPI 3.1 document
    routes = {  # a Starlette convertor ("{rec_id:path}") is no part of the OpenAPI path
        (re.sub(r":\w+}", "}", route.path), method.lower())
        for route in client.app.routes  # type: ignore[attr-defined]
        if isinstance(route, Route)
        for method in (route.methods or ()) - {"HEAD"}
    }
    documented = {(path, method) for path, ops in document["paths"].items() for method in ops}
    # the console's read routes (collector/web/fleet_api.py, trend_api.py) and the savings
    # route (collector/http/savings.py) are mounted beside this app
    assert documented - routes == {
        ("/v1/fleet/summary", "get"),
        ("/v1/gpus/usage", "get"),
        ("/v1/fleet/trend", "get"),
        ("/v1/savings", "get"),
    }
    assert routes <= documented
    batch = document["components"]["schemas"]["Batch"]
    assert {"node", "agent_boot_id", "seq", "samples"} <= set(batch["required"])
    # each saving states its observation window and the range it supports
    savings = document["components"]["schemas"]["Savings"]["properties"]
    assert {"evidence_seconds", "money_per_month_low", "confidence"} <= set(savings)
    kinds = document["components"]["schemas"]["RecommendationKind"]["enum"]
    assert "consolidate" in kinds


def test_the_openapi_document_states_values_the_types_cannot(client: AsgiClient) -> None:
    """schema_version's one value, the status enums, start < end and each route's scope."""
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert schemas["Batch"]["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert schemas["BatchAck"]["properties"]["status"]["enum"] == ["accepted", "duplicate"]
    statuses = [s.value for s in RecommendationStatus]
    assert sorted(schemas["RecommendationStatus"]["enum"]) == sorted(statuses)
    listed = schemas["RecommendationsResponse"]["properties"]["statuses"]["items"]
    assert listed == {"$ref": "#/components/schemas/RecommendationStatus"}
    parameters = document["paths"]["/v1/recommendations"]["get"]["parameters"]
    [status] = [p for p in parameters if p["name"] == "status"]
    pattern = re.compile(status["schema"]["pattern"])
    assert pattern.match("open,notified") and pattern.match("all")
    assert not pattern.match("open,bogus")
    workloads = document["paths"]["/v1/workloads"]["get"]
    start, end = workloads["parameters"]
    assert "before end" in start["description"] and "after start" in end["description"]
    assert "start not before end" in workloads["responses"]["422"]["description"]
    scopes = {
        (path, method): op.get("description", "")
        for path, ops in document["paths"].items()
        for method, op in ops.items()
    }
    assert scopes[("/v1/batches", "post")] == "Needs a bearer token with the `agent` scope."
    assert "`read` scope" in scopes[("/v1/fleet", "get")]
    assert "`admin` scope" in scopes[("/v1/recommendations/{rec_id}/dismiss", "post")]
    assert "403" in document["paths"]["/v1/fleet"]["get"]["responses"]


def test_docs_page_links_the_document(client: AsgiClient) -> None:
    page = client.get("/docs")
    assert page.headers["content-type"].startswith("text/html")
    assert "href='/openapi.json'" in page.text
    assert "POST /v1/batches" in page.text


def test_extra_routes_are_served(backend: FakeBackend) -> None:
    async def hello(request: Request) -> Response:
        return PlainTextResponse("hello")

    settings = CollectorSettings(server=ServerSettings(allow_anonymous=True))
    app = create_app(backend, settings, [], extra_routes=[Route("/", hello)])
    assert AsgiClient(app).get("/").text == "hello"
