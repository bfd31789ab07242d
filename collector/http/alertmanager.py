"""``POST /v1/alertmanager``: Alertmanager's webhook (payload version 4) fanned out to our
channels, for the services Alertmanager has no receiver for (Feishu/Lark, DingTalk, WeCom
group robots).

Point a ``webhook_configs`` receiver at it with ``http_config.authorization`` carrying a
collector token with the ``alertmanager`` scope (collector/http/tokens.py): that token can
do nothing else, and no other token (an agent's, a reader's) can post alerts to chat.
Each alert becomes one event keyed by its fingerprint, status and start, so
Alertmanager's repeats (``repeat_interval``, retries) are not sent twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from collector.http.auth import Gate, Scope
from collector.notify.messages import Event, Facts

MAX_BODY_BYTES = 4 * 1024 * 1024
SEVERITIES = {"critical": "critical", "page": "critical", "warning": "warning", "info": "info"}


class Alert(msgspec.Struct, frozen=True):
    status: str
    labels: dict[str, str]
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    startsAt: str = ""  # Alertmanager's field names
    endsAt: str = ""
    generatorURL: str = ""
    fingerprint: str = ""


class Payload(msgspec.Struct, frozen=True):
    version: str
    status: str
    alerts: list[Alert]
    receiver: str = ""
    groupKey: str = ""
    externalURL: str = ""


_DECODER = msgspec.json.Decoder(Payload)


def parse(body: bytes) -> Payload:
    """The payload; ValueError naming what is wrong (a version other than 4 included)."""
    try:
        payload = _DECODER.decode(body)
    except msgspec.DecodeError as err:
        raise ValueError(f"not an Alertmanager webhook payload: {err}") from err
    if payload.version != "4":
        raise ValueError(
            f"version: only Alertmanager webhook version 4 is accepted, got {payload.version!r}"
        )
    return payload


def events(payload: Payload) -> list[Event]:
    return [_event(alert) for alert in payload.alerts]


def _event(alert: Alert) -> Event:
    labels = alert.labels
    fingerprint = (
        alert.fingerprint
        or hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    )
    node = labels.get("node") or labels.get("Hostname") or labels.get("instance", "")
    firing = alert.status == "firing"
    facts = Facts(
        title=alert.annotations.get("summary") or labels.get("alertname", "alert"),
        workload=labels.get("workload", ""),
        namespace=labels.get("namespace", ""),
        nodes=[node] if node else [],
        detail=alert.annotations.get("description", ""),
    )
    return Event(
        key=f"am|{fingerprint}|{alert.status}|{alert.startsAt}",
        source="alertmanager",
        kind="firing" if firing else "alert_resolved",
        severity=SEVERITIES.get(labels.get("severity", ""), "warning") if firing else "info",
        labels=dict(labels),
        facts=facts,
    )


def alertmanager_route(
    announce: Callable[[Event, float], int], gate: Gate, clock: Callable[[], float]
) -> Route:
    """The route to pass to ``create_app(extra_routes=...)``; ``announce`` stores an event
    in the outbox (``Notifier.announce``); ``gate`` checks the alertmanager scope."""

    async def receive(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return JSONResponse({"error": "body too large"}, status_code=413)
        try:
            payload = parse(body)
        except ValueError as err:
            return JSONResponse({"error": "bad payload", "reason": str(err)}, status_code=400)
        now = clock()
        stored = 0
        for event in events(payload):
            stored += await run_in_threadpool(announce, event, now)
        return JSONResponse({"alerts": len(payload.alerts), "stored": stored})

    return Route("/v1/alertmanager", gate.guard(Scope.ALERTMANAGER, receive), methods=["POST"])
