"""Feishu (China) and Lark (international) custom bots: an interactive card (JSON 2.0).

Signing (when the bot has a secret): ``sign = base64(HMAC-SHA256(key="{timestamp}\\n{secret}",
message=b""))`` with the timestamp in seconds; ``timestamp`` and ``sign`` go in the JSON body
(not DingTalk's scheme, which keys the HMAC with the secret). Success is ``code == 0`` (or
the legacy ``StatusCode == 0``); failures come back as HTTP 200 or 400 with another code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
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
    short,
)

MAX_BYTES = 20 * 1000
RATE_LIMITED_CODE = 11232
TEMPLATES = {"critical": "red", "warning": "orange", "info": "blue"}


def sign(timestamp_seconds: int, secret: str) -> str:
    key = f"{timestamp_seconds}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def card(text: Text) -> dict[str, Any]:
    content = as_markdown(text, with_title=False)
    if text.mentions:
        content += "\n" + " ".join(f"<at id={m.id}></at>" for m in text.mentions)
    elements: list[dict[str, Any]] = [{"tag": "markdown", "content": content}]
    for label, url in text.links:
        elements.append(
            {
                "tag": "button",
                "text": {"tag": "plain_text", "content": label},
                "behaviors": [{"type": "open_url", "default_url": url}],
            }
        )
    for b in text.answers:  # the press is posted to /v1/answers/feishu
        elements.append(
            {
                "tag": "button",
                "text": {"tag": "plain_text", "content": b.label},
                "type": "danger" if b.action == "release" else "default",
                "behaviors": [
                    {"type": "callback", "value": {"gpufleet": b.action, "rec": b.rec_id}}
                ],
            }
        )
    return {
        "schema": "2.0",
        "header": {
            "title": {"tag": "plain_text", "content": text.title},
            "template": TEMPLATES.get(text.severity, "blue"),
        },
        "body": {"elements": elements},
    }


def payload(text: Text, channel: Channel, now: float) -> dict[str, Any]:
    out: dict[str, Any] = {"msg_type": "interactive", "card": card(text)}
    if channel.secret:
        timestamp = int(now)
        out["timestamp"] = str(timestamp)
        out["sign"] = sign(timestamp, channel.secret)
    return out


def build(text: Text, channel: Channel, now: float) -> Request:
    return Request(channel.url, json_body(payload(text, channel, now)), dict(JSON_HEADERS))


def interpret(status: int, headers: Mapping[str, str], body: bytes) -> SendOutcome:
    answer = json_or_empty(body)
    code = answer.get("code", answer.get("StatusCode"))
    if status == 200 and code == 0:
        return SendOutcome(Verdict.OK)
    if code == RATE_LIMITED_CODE:
        return SendOutcome(Verdict.RATE_LIMITED, 60.0, f"code {code}")
    verdict = classify_http(status, headers, frozenset({200, 400}))
    if verdict is not None:
        return verdict
    message = answer.get("msg", answer.get("StatusMessage", ""))
    return SendOutcome(Verdict.PERMANENT, None, short(f"code {code}: {message}"))


def fits(text: Text, channel: Channel) -> bool:
    return len(json_body(payload(text, channel, 0))) <= MAX_BYTES


SERVICE = Service(build, interpret, fits)


def answered_card(title: str, text: str, severity: str = "info") -> dict[str, Any]:
    """The card a Feishu/Lark card-action callback answers with: the message as answered,
    its buttons gone (``{"card": {"type": "raw", "data": ...}}`` replaces it in place)."""
    return {
        "schema": "2.0",
        "header": {
            "title": {"tag": "plain_text", "content": title or "gpufleet"},
            "template": "green" if severity == "info" else TEMPLATES.get(severity, "blue"),
        },
        "body": {"elements": [{"tag": "markdown", "content": text}]},
    }
