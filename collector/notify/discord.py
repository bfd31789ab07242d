"""Discord webhook: one embed; 204 No Content is success (200 with ``?wait=true``).

``allowed_mentions`` lists only the configured users, so alert text never pings
@everyone. A 429 carries ``retry_after`` (float seconds) in its JSON body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collector.notify.messages import Text, as_markdown
from collector.notify.settings import Channel
from collector.notify.vendor import (
    JSON_HEADERS,
    Request,
    SendOutcome,
    Service,
    Verdict,
    classify_http,
    json_body,
    json_or_empty,
)

MAX_TITLE = 256
MAX_DESCRIPTION = 4096
MAX_EMBED_TOTAL = 6000
COLOURS = {"critical": 0xE01E5A, "warning": 0xECB22E, "info": 0x1D9BD1}


def embed(text: Text) -> dict[str, Any]:
    return {
        "title": text.title[:MAX_TITLE],
        "description": as_markdown(text, with_title=False)[:MAX_DESCRIPTION],
        "color": COLOURS.get(text.severity, COLOURS["info"]),
    }


def build(text: Text, channel: Channel, now: float) -> Request:
    payload = {
        "content": " ".join(f"<@{m.id}>" for m in text.mentions),
        "embeds": [embed(text)],
        "allowed_mentions": {"parse": [], "users": [m.id for m in text.mentions]},
    }
    return Request(channel.url, json_body(payload), dict(JSON_HEADERS))


def interpret(status: int, headers: Mapping[str, str], body: bytes) -> SendOutcome:
    if status == 429:
        seconds = json_or_empty(body).get("retry_after")
        if isinstance(seconds, int | float):
            return SendOutcome(Verdict.RATE_LIMITED, float(seconds), "HTTP 429")
    verdict = classify_http(status, headers, frozenset({200, 204}))
    return verdict if verdict is not None else SendOutcome(Verdict.OK)


def fits(text: Text, channel: Channel) -> bool:
    description = as_markdown(text, with_title=False)
    return len(description) <= MAX_DESCRIPTION and len(description) + len(text.title) <= (
        MAX_EMBED_TOTAL
    )


SERVICE = Service(build, interpret, fits)
