"""DingTalk custom robot: markdown; at most 20 messages a minute per robot.

Signing ("加签", when the robot has a ``SEC...`` secret): ``sign = urlencode(base64(
HMAC-SHA256(key=secret, message="{timestamp_ms}\\n{secret}")))``, sent with ``timestamp``
(milliseconds) in the query string. Failures are HTTP 200 with ``errcode != 0``;
``130101`` means "sent too fast". DingTalk markdown needs a blank line for a line break
and an ``@mobile`` in the text for each person in ``at``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse
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
)

MAX_BYTES = 20 * 1000  # (verify) the robot's body limit; kept like Feishu's
RATE_LIMITED_CODE = 130101


def sign(timestamp_ms: int, secret: str) -> str:
    """The URL-encoded signature for the query string."""
    message = f"{timestamp_ms}\n{secret}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return urllib.parse.quote_plus(base64.b64encode(digest).decode())


def signed_url(url: str, secret: str, now: float) -> str:
    if not secret:
        return url
    timestamp_ms = int(now * 1000)
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}timestamp={timestamp_ms}&sign={sign(timestamp_ms, secret)}"


def payload(text: Text, channel: Channel) -> dict[str, Any]:
    content = as_markdown(text, bold="**", newline="\n\n")
    mobiles = [m.id for m in text.mentions if m.by_mobile]
    user_ids = [m.id for m in text.mentions if not m.by_mobile and m.id != "all"]
    if mobiles or user_ids:
        content += "\n\n" + " ".join(f"@{m}" for m in (*mobiles, *user_ids))
    at_all = any(m.id == "all" for m in text.mentions)
    return {
        "msgtype": "markdown",
        "markdown": {"title": text.title, "text": content},
        "at": {"atMobiles": mobiles, "atUserIds": user_ids, "isAtAll": at_all},
    }


def build(text: Text, channel: Channel, now: float) -> Request:
    url = signed_url(channel.url, channel.secret, now)
    return Request(url, json_body(payload(text, channel)), dict(JSON_HEADERS))


def interpret(status: int, headers: Mapping[str, str], body: bytes) -> SendOutcome:
    return interpret_errcode(status, headers, body, RATE_LIMITED_CODE)


def fits(text: Text, channel: Channel) -> bool:
    return len(json_body(payload(text, channel))) <= MAX_BYTES


SERVICE = Service(build, interpret, fits)
