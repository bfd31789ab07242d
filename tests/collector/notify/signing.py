"""Each service's signature, written again from the vendors' documentation, for the fakes.

Deliberately not imported from collector.notify: a test that reused the code under test
to check it could not fail.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import quote


def feishu_sign(timestamp_seconds: str, secret: str) -> str:
    # Feishu/Lark: HMAC-SHA256 keyed with "timestamp\nsecret" over an empty message
    mac = hmac.new(key=(timestamp_seconds + "\n" + secret).encode("utf-8"), digestmod="sha256")
    return base64.b64encode(mac.digest()).decode("ascii")


def dingtalk_sign_raw(timestamp_ms: str, secret: str) -> str:
    # DingTalk: HMAC-SHA256 keyed with the secret over "timestamp\nsecret", base64
    mac = hmac.new(
        secret.encode("utf-8"), (timestamp_ms + "\n" + secret).encode("utf-8"), hashlib.sha256
    )
    return base64.b64encode(mac.digest()).decode("ascii")


def dingtalk_sign_query(timestamp_ms: str, secret: str) -> str:
    return quote(dingtalk_sign_raw(timestamp_ms, secret), safe="")


def standard_webhooks_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    key = (
        base64.b64decode(secret[len("whsec_") :])
        if secret.startswith("whsec_")
        else secret.encode()
    )
    mac = hmac.new(key, msg_id.encode() + b"." + timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode("ascii")
