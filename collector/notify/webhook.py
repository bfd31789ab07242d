"""Our generic JSON webhook, signed the Standard Webhooks way (deploy-notify.md §1.8).

Headers: ``webhook-id`` (stable for one message across retries, so a receiver can drop
repeats), ``webhook-timestamp`` (Unix seconds), ``webhook-signature: v1,<base64>`` where
the signature is HMAC-SHA256 over ``"{id}.{timestamp}.{body}"`` keyed with the secret
(``whsec_<base64 key>``; a secret without the prefix is used as UTF-8 bytes). Any 2xx is
success. The body is a CloudEvents-shaped envelope.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping
from typing import Any

from collector.notify.messages import Text
from collector.notify.settings import Channel
from collector.notify.vendor import (
    JSON_HEADERS,
    Request,
    SendOutcome,
    Service,
    Verdict,
    classify_http,
    json_body,
)

MAX_BYTES = 256 * 1024


def secret_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error as err:
            raise ValueError("webhook secret: whsec_ key is not valid base64") from err
    return secret.encode()


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def message_id(text: Text) -> str:
    digest = hashlib.sha256("\n".join(text.event_keys).encode()).hexdigest()[:32]
    return f"msg_{digest}"


def envelope(text: Text, now: float, msg_id: str) -> dict[str, Any]:
    data = {
        "title": text.title,
        "severity": text.severity,
        "sections": [
            {"heading": s.heading, "fields": [{"name": k, "value": v} for k, v in s.fields]}
            for s in text.sections
        ],
        "events": list(text.event_keys),
        #: per event, for a script that acts on it: command, deadline, links, owner
        "items": [dict(s.data) for s in text.sections],
        "links": [{"label": label, "url": url} for label, url in text.links],
        "mentions": [{"id": m.id, "name": m.name} for m in text.mentions],
    }
    return {
        "specversion": "1",
        "id": msg_id,
        "type": "io.gpufleet.notification",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "source": "gpufleet",
        "data": data,
    }


def build(text: Text, channel: Channel, now: float) -> Request:
    msg_id = message_id(text)
    body = json_body(envelope(text, now, msg_id))
    headers = dict(JSON_HEADERS)
    timestamp = int(now)
    headers["webhook-id"] = msg_id
    headers["webhook-timestamp"] = str(timestamp)
    if channel.secret:
        headers["webhook-signature"] = signature(channel.secret, msg_id, timestamp, body)
    return Request(channel.url, body, headers)


def interpret(status: int, headers: Mapping[str, str], body: bytes) -> SendOutcome:
    if 200 <= status < 300:
        return SendOutcome(Verdict.OK)
    verdict = classify_http(status, headers, frozenset())
    if verdict is not None:
        return verdict
    return SendOutcome(Verdict.PERMANENT, None, f"HTTP {status}")


def fits(text: Text, channel: Channel) -> bool:
    return len(json_body(envelope(text, 0, message_id(text)))) <= MAX_BYTES


SERVICE = Service(build, interpret, fits)
