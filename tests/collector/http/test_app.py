"""The collector's HTTP edge under a real uvicorn server on 127.0.0.1, called with httpx."""

from __future__ import annotations

import gzip
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import msgspec
import pytest
import uvicorn
from starlette.applications import Starlette

from agent.model import encode_batch
from collector.config import CollectorSettings, ServerSettings
from collector.http.app import create_app
from tests.collector.http.test_app_fake import NOW, FakeBackend, make_batch

TOKEN = "s3cret-agent-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}
LIMIT = 64 * 1024


@contextmanager
def served(app: Starlette) -> Iterator[httpx.Client]:
    """``app`` on an ephemeral loopback port in a thread; a client pointed at it."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, ws="none", lifespan="off",
                            log_level="warning")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def settings(**server: object) -> CollectorSettings:
    return CollectorSettings(server=ServerSettings(max_body_bytes=LIMIT, **server))  # type: ignore[arg-type]


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend(settings=settings())


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[FakeBackend, httpx.Client]]:
    """One server for the tests that only send refused batches (faster than one each)."""
    backend = FakeBackend(settings=settings())
    with served(create_app(backend, settings(), [TOKEN], clock=lambda: NOW)) as http:
        yield backend, http


@pytest.fixture
def client(backend: FakeBackend) -> Iterator[httpx.Client]:
    with served(create_app(backend, settings(), [TOKEN], clock=lambda: NOW)) as http:
        yield http


def post(client: httpx.Client, body: bytes, **headers: str) -> httpx.Response:
    return client.post("/v1/batches", content=body, headers={**AUTH, **JSON, **headers})


def test_a_batch_without_a_token_is_401_with_a_challenge(
    client: httpx.Client, backend: FakeBackend
) -> None:
    response = client.post("/v1/batches", content=encode_batch(make_batch()), headers=JSON)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="gpufleet"'
    assert backend.ingested == []
    assert backend.rejections[("unauthorized", 0)] == 1


def test_a_wrong_token_is_401_invalid_token(client: httpx.Client, backend: FakeBackend) -> None:
    wrong = (f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer", "Bearer ünïcode".encode())
    for header in wrong:
        headers = {**JSON, "Authorization": header}
        response = client.post("/v1/batches", content=encode_batch(make_batch()), headers=headers)
        assert response.status_code == 401, header
        assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert backend.ingested == []


def test_a_good_batch_with_the_token_is_acknowledged_and_stored(
    client: httpx.Client, backend: FakeBackend
) -> None:
    batch = make_batch(gpus=3)
    response = post(client, encode_batch(batch))
    assert response.status_code == 200
    assert response.json() == {"status": "accepted", "node": "node-a", "agent_boot_id": "boot-1",
                               "seq": 1, "samples_accepted": 3, "samples_late": 0,
                               "warnings": []}  # fmt: skip
    [(stored, body, received_at)] = backend.ingested
    assert same_fields(stored, batch)
    assert (body, received_at) == (encode_batch(batch), NOW)


def test_a_gzipped_batch_is_decoded_and_stored_as_sent(
    client: httpx.Client, backend: FakeBackend
) -> None:
    batch = make_batch()
    gzipped = gzip.compress(encode_batch(batch))
    response = post(client, gzipped, **{"Content-Encoding": "gzip"})
    assert response.status_code == 200
    stored, body = backend.ingested[0][:2]
    assert same_fields(stored, batch)
    assert body == gzipped


def test_a_repeated_batch_is_acknowledged_as_duplicate(
    client: httpx.Client, backend: FakeBackend
) -> None:
    body = encode_batch(make_batch(seq=9))
    statuses = [post(client, body).json()["status"] for _ in range(3)]
    assert statuses == ["accepted", "duplicate", "duplicate"]
    assert len(backend.ingested) == 1


def test_past_the_limit_by_content_length_is_413(
    client: httpx.Client, backend: FakeBackend
) -> None:
    response = post(client, b" " * (LIMIT + 1))
    assert response.status_code == 413
    assert response.json()["reason"] == "too_large"
    assert response.json()["error"] == (
        f"batch is larger than {LIMIT} bytes (as sent); send smaller batches"
    )
    assert backend.rejections[("too_large", 0)] == 1


def test_past_the_limit_while_streaming_is_413(client: httpx.Client, backend: FakeBackend) -> None:
    def chunks() -> Iterator[bytes]:  # chunked transfer: no Content-Length to trust
        for _ in range(20):
            yield b" " * 8192

    response = client.post("/v1/batches", content=chunks(), headers={**AUTH, **JSON})
    assert "content-length" not in response.request.headers
    assert response.status_code == 413


def test_a_gzip_bomb_is_413(client: httpx.Client, backend: FakeBackend) -> None:
    bomb = gzip.compress(b" " * (LIMIT * 100))
    assert len(bomb) < LIMIT
    response = post(client, bomb, **{"Content-Encoding": "gzip"})
    assert response.status_code == 413
    assert "(decompressed); send smaller batches" in response.json()["error"]
    assert backend.ingested == []


@pytest.mark.parametrize(
    ("headers", "status"),
    [({"Content-Type": "text/plain"}, 415), ({"Content-Encoding": "br"}, 415)],
)
def test_wrong_media_is_415(
    shared: tuple[FakeBackend, httpx.Client], headers: dict[str, str], status: int
) -> None:
    backend, client = shared
    response = post(client, encode_batch(make_batch()), **headers)
    assert response.status_code == status
    assert response.json()["reason"] == "unsupported_media_type"
    assert backend.ingested == []


def same_fields(decoded: object, batch: object) -> bool:
    """Equal field by field (the decoder's ``CheckedBatch`` is a Batch subclass, and msgspec
    structs of different classes never compare equal)."""
    return bool(msgspec.to_builtins(decoded) == msgspec.to_builtins(batch))


def raw_batch(**sample_fields: object) -> dict:
    raw = msgspec.json.decode(encode_batch(make_batch(gpus=2)))
    raw["samples"][1].update(sample_fields)
    return raw


@pytest.mark.parametrize(
    ("raw", "field", "reason", "words"),
    [
        (raw_batch(power_watts="hot"), "$.samples[1].power_watts", "malformed", "str"),
        (raw_batch(energy_joules=-5.0), "$.samples[1].energy_joules", "invalid_value", "-5.0"),
        (raw_batch(sm_activity=1.01), "$.samples[1].sm_activity", "invalid_value", "1.01"),
        (raw_batch(timestamp=NOW + 3600), "$.samples[1].timestamp", "future_timestamp", "ahead"),
        (raw_batch(timestamp=NOW - 8 * 86400), "$.samples[1].timestamp", "past_timestamp", "old"),
        (raw_batch(gpu_uuid="GPU-ghost"), "$.samples[1].gpu_uuid", "unknown_gpu", "GPU-ghost"),
        ({**raw_batch(), "schema_version": 99}, "$.schema_version", "schema_version", "99"),
        ({**raw_batch(), "seq": "one"}, "$.seq", "malformed", "int"),
    ],
)
def test_a_bad_batch_is_422_naming_the_field(
    shared: tuple[FakeBackend, httpx.Client], raw: dict, field: str, reason: str, words: str
) -> None:
    backend, client = shared
    before = backend.rejections.copy()
    response = post(client, msgspec.json.encode(raw))
    assert response.status_code == 422
    body = response.json()
    assert (body["field"], body["reason"]) == (field, reason)
    assert words in body["error"]
    assert backend.ingested == []
    samples = 0 if reason in ("malformed", "schema_version") else 2
    assert backend.rejections - before == {(reason, samples): 1}


def test_power_beyond_float_range_and_nan_are_422(shared: tuple[FakeBackend, httpx.Client]) -> None:
    _, client = shared
    good = encode_batch(make_batch(gpus=1))
    huge = post(client, good.replace(b'"power_watts":300.0', b'"power_watts":1e999'))
    nan = post(client, good.replace(b'"power_watts":300.0', b'"power_watts":NaN'))
    assert (huge.status_code, huge.json()["field"]) == (422, "$.samples[0].power_watts")
    assert (nan.status_code, nan.json()["reason"]) == (422, "malformed")


def test_one_nodes_bad_batch_leaves_other_nodes_alone(
    client: httpx.Client, backend: FakeBackend
) -> None:
    assert post(client, encode_batch(make_batch("node-a", seq=1))).status_code == 200
    bad = make_batch("node-b", seq=1, power_watts=-1.0)
    assert post(client, encode_batch(bad)).status_code == 422
    assert post(client, encode_batch(make_batch("node-a", seq=2))).status_code == 200
    assert [(b.node, b.seq) for b, _, _ in backend.ingested] == [("node-a", 1), ("node-a", 2)]
    fleet = client.get("/v1/fleet", headers=AUTH).json()
    assert {gpu["node"] for gpu in fleet["gpus"]} == {"node-a"}


def test_a_failing_backend_is_503_and_the_agent_can_retry(
    client: httpx.Client, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="collector.http.app")
    body = encode_batch(make_batch())
    backend.fail_ingest = True
    for _ in range(3):  # an agent's retries: one ERROR for the streak
        assert post(client, body).status_code == 503
    backend.fail_ingest = False
    assert post(client, body).json()["status"] == "accepted"
    messages = [r.getMessage() for r in caplog.records if r.name == "collector.http.app"]
    assert sum("storing a batch failed" in m for m in messages) == 1
    assert sum("batches are stored again" in m for m in messages) == 1


def test_a_refusal_is_logged_once_a_minute_per_reason_and_counted_each_time(
    client: httpx.Client, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="collector.http.app")
    bad = encode_batch(make_batch(power_watts=-1.0))
    ghost = msgspec.json.encode(raw_batch(gpu_uuid="GPU-ghost"))
    for body in (bad, bad, bad, ghost, ghost):  # an agent retrying what it cannot fix
        assert post(client, body).status_code == 422
    messages = [r.getMessage() for r in caplog.records if r.name == "collector.http.app"]
    refused = [m for m in messages if m.startswith("batch refused")]
    assert len(refused) == 2 and "invalid_value" in refused[0] and "unknown_gpu" in refused[1]
    assert backend.rejections == {("invalid_value", 2): 3, ("unknown_gpu", 2): 2}


def test_only_refused_requests_are_logged_at_info(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="collector.http.app")
    assert post(client, encode_batch(make_batch())).status_code == 200
    assert client.post("/v1/batches", content=b"{}").status_code == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.http.app"]
    assert not any("POST /v1/batches 200" in line for line in lines)
    assert any("POST /v1/batches 401" in line for line in lines)


def test_tokens_never_reach_the_log(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    post(client, encode_batch(make_batch()))
    post(client, b"{}", Authorization=f"Bearer {TOKEN}-wrong")
    client.get("/v1/fleet", headers=AUTH)
    assert "POST /v1/batches 200" in caplog.text
    assert TOKEN not in caplog.text


def test_reads_need_the_token_but_probes_and_docs_do_not(client: httpx.Client) -> None:
    for path in ("/v1/fleet", "/v1/workloads", "/v1/recommendations"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers=AUTH).status_code == 200, path
    assert client.post("/v1/recommendations/r1/dismiss").status_code == 401
    for path in ("/healthz", "/livez", "/readyz", "/metrics", "/openapi.json", "/docs"):
        assert client.get(path).status_code == 200, path


def test_anonymous_mode_needs_no_token(backend: FakeBackend) -> None:
    app = create_app(backend, settings(allow_anonymous=True), [], clock=lambda: NOW)
    with served(app) as client:
        response = client.post("/v1/batches", content=encode_batch(make_batch()), headers=JSON)
        assert response.status_code == 200
        assert client.get("/v1/fleet").status_code == 200


def test_an_unknown_route_is_a_json_404(client: httpx.Client) -> None:
    response = client.get("/v2/nothing", headers=AUTH)
    assert response.status_code == 404
    assert response.json()["error"] == "Not Found"


def test_health_is_503_when_the_ledger_fails(client: httpx.Client, backend: FakeBackend) -> None:
    assert client.get("/healthz").json()["ledger_ok"] is True
    backend.healthy = False
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["detail"] == "database is locked"


def test_many_agents_at_once_are_all_acknowledged(backend: FakeBackend) -> None:
    app = create_app(backend, settings(), [TOKEN], clock=lambda: NOW)
    with served(app) as client:
        url = str(client.base_url)
        statuses: list[int] = []

        def agent(node: str) -> None:
            with httpx.Client(base_url=url, timeout=10) as own:
                for seq in range(1, 6):
                    body = encode_batch(make_batch(node, seq=seq))
                    response = own.post("/v1/batches", content=body, headers={**AUTH, **JSON})
                    statuses.append(response.status_code)

        threads = [threading.Thread(target=agent, args=(f"node-{i}",)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert statuses == [200] * 40
    assert len({(b.node, b.seq) for b, _, _ in backend.ingested}) == 40
