"""Each service against a local server that checks shape, signature and size and answers
like the vendor: success, HTTP 200 with an error code, 429 with Retry-After, 5xx."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from collector.notify.stats import NotifyExporter
from tests.collector.notify.rig import HandClock, channel, fake, notifier_for, simple_event

KINDS = ["slack", "teams", "feishu", "lark", "dingtalk", "wecom", "discord", "webhook"]
SECRETS = {
    "feishu": "feishu-secret-1",
    "lark": "lark-secret-2",
    "dingtalk": "SECdingtalk3",
    "webhook": "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=",
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_arrives_once_in_the_services_shape(kind: str, tmp_path: Path) -> None:
    clock = HandClock()
    with (
        fake(kind, clock, SECRETS.get(kind, "")) as service,
        notifier_for(tmp_path, [channel(service, digest_interval_seconds=0)], clock) as notifier,
    ):
        notifier.announce(simple_event("e1"), clock.now)
        assert notifier.deliver() == 1
        assert notifier.deliver() == 0  # nothing twice
        assert len(service.received) == 1 and service.received[0].ok, service.received
        assert_shape(kind, service.received[0].json, service.received[0].headers)


def assert_shape(kind: str, body: dict, headers: dict[str, str]) -> None:  # type: ignore[type-arg]
    if kind == "slack":
        assert body["blocks"][0]["type"] == "header" and "notebook" not in body["text"][:0]
        assert any(b["type"] == "actions" for b in body["blocks"])  # link buttons
    elif kind == "teams":
        assert body["attachments"][0]["content"]["actions"][0]["type"] == "Action.OpenUrl"
    elif kind in ("feishu", "lark"):
        assert body["card"]["header"]["template"] == "orange"  # severity warning
        assert "timestamp" in body and "sign" in body
    elif kind == "dingtalk":
        assert "Deadline" in body["markdown"]["text"]
    elif kind == "wecom":
        assert body["markdown"]["content"].startswith('<font color="warning">')
    elif kind == "discord":
        assert body["allowed_mentions"] == {"parse": [], "users": []}
    elif kind == "webhook":
        assert body["specversion"] == "1" and body["data"]["events"] == ["e1"]
        assert headers["webhook-signature"].startswith("v1,")


BAD_ANSWERS = {
    # the service refuses for good: a wrong signing secret, a revoked token
    "feishu": "wrong-secret",
    "lark": "wrong-secret",
    "dingtalk": "SECwrong",
    "webhook": "whsec_d3Jvbmcta2V5",
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_permanent_refusal_marks_the_channel_broken_without_leaking_secrets(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = HandClock()
    with fake(kind, clock, SECRETS.get(kind, "")) as service:
        settings = channel(service, digest_interval_seconds=0)
        if kind in BAD_ANSWERS:  # the channel is configured with the wrong secret
            settings = channel(service, digest_interval_seconds=0)
            object.__setattr__(settings, "secret", BAD_ANSWERS[kind])
        else:  # the token in the URL was revoked
            object.__setattr__(settings, "url", service.url.replace(service.token, "revoked"))
        if kind == "wecom":
            service.script.append((200, {}, b'{"errcode":93000,"errmsg":"invalid webhook url"}'))
        with caplog.at_level(logging.DEBUG), notifier_for(tmp_path, [settings], clock) as n:
            n.announce(simple_event("e1"), clock.now)
            assert n.deliver() == 0
            assert n.deliver(clock.now + 3600) == 0  # broken: no more tries
            assert len(service.received) == 1 and not service.received[0].ok
            assert "ops" in n.stats.broken()
            metrics = scrape(n)
        assert f'gpufleet_notify_channel_broken{{channel="ops",kind="{kind}"}} 1.0' in metrics
        assert 'gpufleet_notify_outbox_pending{channel="ops"} 1.0' in metrics
        text = caplog.text + metrics
        assert "'ops'" in caplog.text and "permanently" in caplog.text
        secrets = (service.token, "revoked", BAD_ANSWERS.get(kind), service.secret)
        for secret in filter(None, secrets):
            assert secret not in text


def scrape(notifier) -> str:  # type: ignore[no-untyped-def]
    registry = CollectorRegistry()
    registry.register(
        NotifyExporter(
            notifier.stats,
            {c.name: c.kind for c in notifier.channels},
            notifier.outbox.pending_by_channel,
        )
    )
    return generate_latest(registry).decode()


RATE_LIMITED = {
    "slack": ((429, {"Retry-After": "7"}, b"rate_limited"), 7.0),
    "teams": ((429, {"Retry-After": "7"}, b""), 7.0),
    "discord": (
        (
            429,
            {"Content-Type": "application/json"},
            b'{"message":"You are being rate limited.","retry_after":6.5,"global":false}',
        ),
        6.5,
    ),
    "webhook": ((429, {"Retry-After": "7"}, b""), 7.0),
    "feishu": ((200, {}, b'{"code":11232,"msg":"frequency limited"}'), 60.0),
    "lark": ((200, {}, b'{"code":11232,"msg":"frequency limited"}'), 60.0),
    "dingtalk": ((200, {}, b'{"errcode":130101,"errmsg":"send too fast"}'), 60.0),
    "wecom": ((200, {}, b'{"errcode":45009,"errmsg":"api freq out of limit"}'), 60.0),
}


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limited_waits_as_long_as_the_service_says(kind: str, tmp_path: Path) -> None:
    answer, wait = RATE_LIMITED[kind]
    clock = HandClock()
    with (
        fake(kind, clock, SECRETS.get(kind, "")) as service,
        notifier_for(tmp_path, [channel(service, digest_interval_seconds=0)], clock) as notifier,
    ):
        service.script.append(answer)
        notifier.announce(simple_event("e1"), clock.now)
        assert notifier.deliver() == 0
        clock.now += wait - 0.5
        assert notifier.deliver() == 0 and len(service.received) == 1  # still waiting
        clock.now += 0.5
        assert notifier.deliver() == 1
        assert [r.ok for r in service.received] == [False, True]
        assert "ops" not in notifier.stats.broken()


@pytest.mark.parametrize("kind", ["slack", "dingtalk", "webhook"])
def test_server_errors_and_network_errors_back_off_and_retry(kind: str, tmp_path: Path) -> None:
    clock = HandClock()
    with (
        fake(kind, clock, SECRETS.get(kind, "")) as service,
        notifier_for(
            tmp_path,
            [channel(service, digest_interval_seconds=0)],
            clock,
            backoff_initial_seconds=5.0,
        ) as notifier,
    ):
        service.script.extend([(503, {}, b"busy"), (500, {}, b"oops")])
        notifier.announce(simple_event("e1"), clock.now)
        assert notifier.deliver() == 0  # 503: retry in 5 s
        clock.now += 4.9
        assert notifier.deliver() == 0
        clock.now += 0.1
        assert notifier.deliver() == 0  # 500: retry in 10 s
        clock.now += 10
        assert notifier.deliver() == 1
        assert len(service.received) == 3 and service.received[-1].ok


def test_a_connection_refused_is_retried_not_broken(tmp_path: Path) -> None:
    clock = HandClock()
    with fake("slack", clock) as service:
        url = service.url
    settings = channel(service, digest_interval_seconds=0)
    object.__setattr__(settings, "url", url)  # the server is gone now
    with notifier_for(tmp_path, [settings], clock) as notifier:
        notifier.announce(simple_event("e1"), clock.now)
        assert notifier.deliver() == 0
        assert notifier.stats.broken() == {}
        assert notifier.stats.messages() == {("ops", "slack", "retry"): 1}
