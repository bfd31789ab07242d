"""Scoped tokens in the real collector (build_collector over a SQLite ledger, its own
uvicorn on loopback, tokens read from a token file): each route answers only the scope it
needs. An agent token posts batches and nothing else (no reads, no dismissing, no alerts to
chat); a read token reads; admin dismisses; the Alertmanager token posts alerts only; with
``server.metrics_require_token`` /metrics needs the metrics token. Refusals are 403 naming
the token by its name, and counted in gpufleet_collector_auth_failures_total."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agent.model import encode_batch
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from collector.notify.settings import ChannelSettings, NotificationSettings, RouteSettings
from gpufleet.cli.collector import build_collector, serve
from tests.collector.http.test_app_fake import NOW, make_batch
from tests.collector.notify.fake_services import FakeService
from tests.collector.notify.test_alertmanager import payload
from tests.e2e.fleet_rig import free_port

TOKENS = {
    "agent": "tok-agent-0001 agent nodes=node-a name=agent-a",
    "read": "tok-read-0002 read name=grafana",
    "admin": "tok-admin-0003 admin name=ops",
    "alertmanager": "tok-am-0004 alertmanager name=am",
    "metrics": "tok-prom-0005 metrics name=prometheus",
    "bare": "tok-bare-0006",
}
SECRETS = {scope: line.split()[0] for scope, line in TOKENS.items()}
BATCH = encode_batch(make_batch("node-a", seq=1))
#: (method, path, body) -> the one scope it needs
ROUTES: list[tuple[str, str, bytes | None, str]] = [
    ("POST", "/v1/batches", BATCH, "agent"),
    ("GET", "/v1/fleet", None, "read"),
    ("GET", "/v1/workloads", None, "read"),
    ("GET", "/v1/recommendations", None, "read"),
    ("GET", "/v1/gpus/usage", None, "read"),
    ("GET", "/v1/plans", None, "read"),
    ("POST", "/v1/recommendations/none/dismiss", None, "admin"),
    ("POST", "/v1/alertmanager", None, "alertmanager"),
    ("GET", "/metrics", None, "metrics"),
]


@pytest.fixture(scope="module")
def collector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("scopes")
    (tmp / "tokens").write_text("\n".join(TOKENS.values()) + "\n")
    chat = FakeService("feishu", secret="scope-feishu-secret")
    port = free_port()
    route = RouteSettings(channels=["oncall"], sources=["alertmanager"])
    channel = ChannelSettings(name="oncall", kind="feishu", url=chat.url, secret=chat.secret)
    settings = CollectorSettings(
        server=ServerSettings(port=port, tokens_file=tmp / "tokens", metrics_require_token=True),
        ledger=LedgerSettings(url=str(tmp / "ledger.db")),
        notifications=NotificationSettings(channels=[channel], routes=[route]),
    )
    collector = build_collector(settings, clock=lambda: NOW + 60)
    server = serve(collector)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        collector.stop()
        chat.close()


def call(url: str, method: str, path: str, body: bytes | None, token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if path == "/v1/alertmanager":
        return httpx.post(url + path, json=payload(), headers=headers)
    if body is not None:
        headers["Content-Type"] = "application/json"
    return httpx.request(method, url + path, content=body, headers=headers)


@pytest.mark.parametrize("scope", list(TOKENS))
def test_each_route_answers_only_its_scope(collector_url: str, scope: str) -> None:
    for method, path, body, needs in ROUTES:
        response = call(collector_url, method, path, body, SECRETS[scope])
        if scope in (needs, "bare"):  # a bare token may still do everything
            assert response.status_code in (200, 404), (scope, path, response.text)
            continue
        assert response.status_code == 403, (scope, path)
        name = TOKENS[scope].split("name=")[1]
        assert response.json()["error"] == (
            f"token {name!r} has scopes {scope}; this route needs the {needs} scope"
        )
        assert response.json()["reason"] == "forbidden"
        assert response.headers["www-authenticate"].endswith('error="insufficient_scope"')
        assert SECRETS[scope] not in response.text


def test_refusals_are_counted_by_reason_without_token_or_address(collector_url: str) -> None:
    def failures() -> dict[str, float]:
        text = call(collector_url, "GET", "/metrics", None, SECRETS["metrics"]).text
        lines = [ln for ln in text.splitlines() if ln.startswith("gpufleet_collector_auth_fail")]
        return {ln.split('"')[1]: float(ln.split()[-1]) for ln in lines}

    before = failures()
    assert httpx.get(collector_url + "/metrics").status_code == 401
    assert call(collector_url, "GET", "/v1/fleet", None, "no-such-token").status_code == 401
    assert call(collector_url, "GET", "/v1/fleet", None, SECRETS["agent"]).status_code == 403
    after = failures()
    assert {k: after[k] - before[k] for k in after} == {
        "missing": 1, "invalid": 1, "scope": 1, "rate_limited": 0,
    }  # fmt: skip
    text = call(collector_url, "GET", "/metrics", None, SECRETS["metrics"]).text
    assert "tok-" not in text and "127.0.0.1" not in text
