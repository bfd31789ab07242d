"""``POST /v1/alertmanager``: payload checks in-process, and end to end with a real
Alertmanager (Debian ``prometheus-alertmanager``) routing a firing alert to the collector
and on to a Feishu-protocol server, then its resolution."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from collector.http.alertmanager import events, parse
from collector.notify.settings import ChannelSettings, NotificationSettings, RouteSettings
from gpufleet.cli.collector import Collector, build_collector, serve
from tests.collector.notify.fake_services import FakeService
from tests.e2e.fleet_rig import free_port

TOKEN = "am-collector-token-41c9"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


def payload(status: str = "firing", version: str = "4") -> dict:  # type: ignore[type-arg]
    return {
        "version": version,
        "groupKey": '{}:{alertname="GpuIdle"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "gpufleet",
        "groupLabels": {"alertname": "GpuIdle"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://am:9093",
        "alerts": [
            {
                "status": status,
                "labels": {
                    "alertname": "GpuIdle",
                    "severity": "critical",
                    "namespace": "ml",
                    "node": "gpu-node-01",
                },
                "annotations": {
                    "summary": "8 GPUs idle on gpu-node-01",
                    "description": "Idle for 2 h while allocated",
                },
                "startsAt": "2026-11-30T08:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prom/graph",
                "fingerprint": "c0ffee1234",
            }
        ],
    }


def test_a_version_4_payload_becomes_one_event_per_alert_keyed_for_dedup() -> None:
    firing = events(parse(json.dumps(payload()).encode()))
    resolved = events(parse(json.dumps(payload("resolved")).encode()))
    assert [
        (e.kind, e.severity, e.labels["namespace"], e.facts.title, e.facts.nodes) for e in firing
    ] == [("firing", "critical", "ml", "8 GPUs idle on gpu-node-01", ["gpu-node-01"])]
    assert firing[0].key == "am|c0ffee1234|firing|2026-11-30T08:00:00Z"
    assert resolved[0].kind == "alert_resolved" and resolved[0].key != firing[0].key
    with pytest.raises(ValueError, match="version 4"):
        parse(json.dumps(payload(version="3")).encode())
    with pytest.raises(ValueError, match="not an Alertmanager"):
        parse(b'{"alerts": "no"}')


@contextmanager
def collector_with_feishu(tmp_path: Path) -> Iterator[tuple[Collector, FakeService, str]]:
    chat = FakeService("feishu", secret="am-feishu-secret")
    port = free_port()
    settings = CollectorSettings(
        server=ServerSettings(port=port, tokens=[TOKEN]),
        ledger=LedgerSettings(url=str(tmp_path / "ledger.db")),
        notifications=NotificationSettings(
            channels=[
                ChannelSettings(
                    name="oncall-cn", kind="feishu", url=chat.url, secret=chat.secret, language="zh"
                )
            ],
            routes=[RouteSettings(channels=["oncall-cn"], sources=["alertmanager"])],
        ),
    )
    collector = build_collector(settings, tokens=frozenset([TOKEN]))
    server = serve(collector)
    try:
        yield collector, chat, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        collector.stop()
        chat.close()


def test_the_route_needs_a_token_and_refuses_bad_payloads(tmp_path: Path) -> None:
    with collector_with_feishu(tmp_path) as (collector, chat, url):
        hook = f"{url}/v1/alertmanager"
        assert httpx.post(hook, json=payload()).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        bad = httpx.post(hook, json=payload(version="2"), headers=auth)
        assert bad.status_code == 400 and "version" in bad.json()["reason"]
        ok = httpx.post(hook, json=payload(), headers=auth)
        assert ok.json() == {"alerts": 1, "stored": 1}
        again = httpx.post(hook, json=payload(), headers=auth)  # Alertmanager's repeat
        assert again.json() == {"alerts": 1, "stored": 0}
        assert collector.alerting and collector.alerting.notifier
        assert collector.alerting.notifier.deliver() == 1
        card = chat.accepted[0].json["card"]
        assert card["header"]["title"]["content"] == "【告警】8 GPUs idle on gpu-node-01"
        assert card["header"]["template"] == "red"
        metrics = httpx.get(f"{url}/metrics").text
        assert (
            'gpufleet_notify_messages_total{channel="oncall-cn",kind="feishu",outcome="ok"} 1.0'
            in (metrics)
        )
        assert 'gpufleet_notify_channel_broken{channel="oncall-cn",kind="feishu"} 0.0' in metrics


@contextmanager
def alertmanager(tmp_path: Path, receiver_url: str) -> Iterator[str]:
    port = free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        json.dumps(
            {
                "route": {
                    "receiver": "gpufleet",
                    "group_by": ["alertname"],
                    "group_wait": "1s",
                    "group_interval": "1s",
                    "repeat_interval": "1h",
                },
                "receivers": [
                    {
                        "name": "gpufleet",
                        "webhook_configs": [
                            {
                                "url": receiver_url,
                                "send_resolved": True,
                                "http_config": {"authorization": {"credentials": TOKEN}},
                            }
                        ],
                    }
                ],
            }
        )
    )
    assert ALERTMANAGER is not None
    proc = subprocess.Popen(
        [
            ALERTMANAGER,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError("alertmanager did not become ready")
        yield url
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def wait_for(condition, seconds: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.skipif(ALERTMANAGER is None, reason="Debian package prometheus-alertmanager missing")
def test_a_real_alertmanager_routes_through_the_collector_to_feishu(tmp_path: Path) -> None:
    with (
        collector_with_feishu(tmp_path) as (collector, chat, url),
        alertmanager(tmp_path, f"{url}/v1/alertmanager") as am,
    ):
        notifier = collector.alerting.notifier  # type: ignore[union-attr]
        now = datetime.now(UTC)
        alert = {
            "labels": {
                "alertname": "GpufleetGpuIdle",
                "severity": "warning",
                "namespace": "ml",
                "node": "gpu-node-03",
            },
            "annotations": {
                "summary": "GPU 3 idle for 45 min",
                "description": "held by pod:ml/notebook-7",
            },
            "startsAt": now.isoformat(),
        }
        assert httpx.post(f"{am}/api/v2/alerts", json=[alert]).status_code == 200

        def delivered(n: int) -> bool:
            notifier.deliver()
            return len(chat.accepted) >= n

        assert wait_for(lambda: delivered(1)), "no firing alert reached the Feishu server"
        first = chat.accepted[0].json
        assert first["card"]["header"]["title"]["content"] == "【告警】GPU 3 idle for 45 min"
        assert "timestamp" in first and "sign" in first  # checked by the fake: HTTP 200 code 0
        assert "gpu-node-03" in first["card"]["body"]["elements"][0]["content"]
        alert["endsAt"] = (now + timedelta(seconds=1)).isoformat()
        httpx.post(f"{am}/api/v2/alerts", json=[alert])
        assert wait_for(lambda: delivered(2)), "the resolution did not arrive"
        assert chat.accepted[1].json["card"]["header"]["title"]["content"] == (
            "【已恢复】GPU 3 idle for 45 min"
        )
        assert all(r.ok for r in chat.received) and len(chat.received) == 2
