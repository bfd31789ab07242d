"""What every service module provides, and the HTTP rules they share (deploy-notify.md §1.9).

A service is three pure functions: ``build`` (a ``Text`` to an HTTP request, signed),
``interpret`` (the answer to a ``SendOutcome``) and ``fits`` (whether a text is within the
service's size limits). Only delivery.py does I/O. A ``SendOutcome.detail`` carries the
service's own error code and message, never the URL (it holds the token).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from collector.notify.messages import Text
from collector.notify.settings import Channel
from gpufleet.retry_after import retry_after_seconds


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: dict[str, str]


class Verdict(enum.StrEnum):
    OK = "ok"
    RETRY = "retry"  # 5xx, network error, timeout: back off and try again
    RATE_LIMITED = "rate_limited"  # 429 or the service's "too fast" code: wait, then again
    PERMANENT = "permanent"  # any other 4xx or error code: the channel is broken


@dataclass(frozen=True)
class SendOutcome:
    """What one attempt to send a chat message came to, read from the service's answer."""

    verdict: Verdict
    retry_after_seconds: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class Service:
    build: Callable[[Text, Channel, float], Request]
    interpret: Callable[[int, Mapping[str, str], bytes], SendOutcome]
    fits: Callable[[Text, Channel], bool]


def json_body(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}


def classify_http(
    status: int, headers: Mapping[str, str], ok: frozenset[int]
) -> SendOutcome | None:
    """The verdict the status alone gives; None when it is a success status whose body
    the service module still has to read."""
    if status in ok:
        return None
    if status == 429:
        return SendOutcome(Verdict.RATE_LIMITED, retry_after(headers), "HTTP 429")
    if status >= 500:
        return SendOutcome(Verdict.RETRY, retry_after(headers), f"HTTP {status}")
    return SendOutcome(Verdict.PERMANENT, None, f"HTTP {status}")


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta or HTTP date); None when absent or unreadable."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    return retry_after_seconds(value, time.time() if now is None else now)


def json_or_empty(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def short(text: object, limit: int = 120) -> str:
    """A service's error message, shortened, for a log line or a metric label."""
    return str(text).replace("\n", " ")[:limit]


def truncate_utf8(text: str, max_bytes: int, marker: str = "…") -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, never inside a character."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(marker.encode())
    return data[: max(0, room)].decode("utf-8", errors="ignore") + marker


def interpret_errcode(
    status: int, headers: Mapping[str, str], body: bytes, rate_limited_code: int
) -> SendOutcome:
    """DingTalk and WeCom robots: HTTP 200 with ``{"errcode": 0}`` is success; their
    "too many messages" code waits a minute; any other code is permanent."""
    verdict = classify_http(status, headers, frozenset({200}))
    if verdict is not None:
        return verdict
    answer = json_or_empty(body)
    code = answer.get("errcode")
    if code == 0:
        return SendOutcome(Verdict.OK)
    if code == rate_limited_code:
        return SendOutcome(Verdict.RATE_LIMITED, 60.0, f"errcode {code}")
    detail = short(f"errcode {code}: {answer.get('errmsg', '')}")
    return SendOutcome(Verdict.PERMANENT, None, detail)
