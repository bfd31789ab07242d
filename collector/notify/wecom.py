"""WeCom (企业微信) group robot: markdown of at most 4096 bytes counted in UTF-8.

No signing: the ``key`` in the URL is the secret. Failures are HTTP 200 with
``errcode != 0``; ``45009`` is "api freq out of limit" (20 messages a minute per robot).
A text too long for one message is cut at a character boundary, by bytes, not characters
(a Chinese character is three bytes).
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
    interpret_errcode,
    json_body,
    truncate_utf8,
)

MAX_CONTENT_BYTES = 4096
RATE_LIMITED_CODE = 45009
COLOURS = {"critical": "warning", "warning": "warning", "info": "info"}


def content(text: Text) -> str:
    body = as_markdown(text, with_title=False)
    title = f'<font color="{COLOURS.get(text.severity, "info")}">**{text.title}**</font>'
    # markdown mentions by userid only; a phone number cannot be mentioned here
    mentions = " ".join(f"<@{m.id}>" for m in text.mentions if not m.by_mobile)
    return "\n".join(part for part in (title, body, mentions) if part)


def build(text: Text, channel: Channel, now: float) -> Request:
    markdown = truncate_utf8(content(text), MAX_CONTENT_BYTES)
    payload: dict[str, Any] = {"msgtype": "markdown", "markdown": {"content": markdown}}
    return Request(channel.url, json_body(payload), dict(JSON_HEADERS))


def interpret(status: int, headers: Mapping[str, str], body: bytes) -> SendOutcome:
    return interpret_errcode(status, headers, body, RATE_LIMITED_CODE)


def fits(text: Text, channel: Channel) -> bool:
    return len(content(text).encode()) <= MAX_CONTENT_BYTES


SERVICE = Service(build, interpret, fits)
