"""Is this answer really from the chat service (or from a link gpufleet signed)? Pure checks.

- Slack interactivity (api.slack.com/authentication/verifying-requests-from-slack):
  ``X-Slack-Signature`` = ``v0=`` + hex HMAC-SHA256(signing secret, ``v0:{ts}:{body}``) with
  ``ts`` = ``X-Slack-Request-Timestamp``, refused when more than 5 minutes from now.
- Feishu/Lark callbacks: with an encrypt key, the body is ``{"encrypt": base64(iv + AES-256-CBC
  ciphertext)}`` keyed by SHA-256(encrypt key), and ``X-Lark-Signature`` = hex
  SHA-256(timestamp + nonce + encrypt key + body); the decrypted (or plain) event carries
  the app's verification token (``header.token``, or ``token`` in the older format).
- Signed links (services without callbacks): ``base64url(claim JSON) . base64url(HMAC-SHA256
  (link secret, claim JSON))``; the claim names the action, the recommendation, the user
  the link was made for and when it expires.

Every refusal is a ``CallbackRefused`` whose message says what was wrong, never a secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

#: Slack's replay window, and the one used for Feishu's signed timestamp
REPLAY_WINDOW_SECONDS = 300.0


class CallbackRefused(Exception):
    """A callback or link that is not genuine, too old, or malformed."""


def slack_signature(signing_secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


def verify_slack(
    signing_secret: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    window_seconds: float = REPLAY_WINDOW_SECONDS,
) -> None:
    """Raise CallbackRefused unless ``body`` was signed by Slack within the window."""
    timestamp = headers.get("x-slack-request-timestamp", "")
    given = headers.get("x-slack-signature", "")
    if not timestamp.isdigit() or not given:
        raise CallbackRefused("missing X-Slack-Request-Timestamp or X-Slack-Signature")
    _fresh(int(timestamp), now, window_seconds, "X-Slack-Request-Timestamp")
    if not hmac.compare_digest(slack_signature(signing_secret, timestamp, body), given):
        raise CallbackRefused("X-Slack-Signature does not match the body (signing secret?)")


def lark_signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def verify_lark_signature(
    encrypt_key: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    window_seconds: float = REPLAY_WINDOW_SECONDS,
) -> None:
    timestamp = headers.get("x-lark-request-timestamp", "")
    nonce = headers.get("x-lark-request-nonce", "")
    given = headers.get("x-lark-signature", "")
    if not timestamp.isdigit() or not given:
        raise CallbackRefused("missing X-Lark-Request-Timestamp or X-Lark-Signature")
    _fresh(int(timestamp), now, window_seconds, "X-Lark-Request-Timestamp")
    if not hmac.compare_digest(lark_signature(timestamp, nonce, encrypt_key, body), given):
        raise CallbackRefused("X-Lark-Signature does not match the body (encrypt key?)")


def lark_decrypt(encrypt_key: str, encrypted: str) -> bytes:
    """The plain text of Feishu's ``encrypt`` field (AES-256-CBC, key SHA-256(encrypt key),
    the first 16 bytes the IV, PKCS#7 padding)."""
    try:
        data = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError) as err:
        raise CallbackRefused("encrypt: not base64") from err
    if len(data) < 32 or len(data) % 16:
        raise CallbackRefused(f"encrypt: {len(data)} bytes is no AES-CBC message")
    key = hashlib.sha256(encrypt_key.encode()).digest()
    decryptor = Cipher(algorithms.AES(key), modes.CBC(data[:16])).decryptor()
    padded = decryptor.update(data[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError as err:
        raise CallbackRefused("encrypt: does not decrypt with the encrypt key") from err


def lark_encrypt(encrypt_key: str, plain: bytes, iv: bytes) -> str:
    """The inverse of ``lark_decrypt`` (what Feishu does; for tests and tools)."""
    key = hashlib.sha256(encrypt_key.encode()).digest()
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plain) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + encryptor.update(padded) + encryptor.finalize()).decode()


def lark_event(
    body: bytes, headers: Mapping[str, str], token: str, encrypt_key: str, now: float
) -> dict[str, Any]:
    """The callback's event, decrypted and checked: signature (with an encrypt key) and
    verification token (with a token)."""
    outer = _json_object(body, "body")
    if encrypt_key:
        if "encrypt" not in outer:
            raise CallbackRefused("an encrypt key is configured: the body must be encrypted")
        if headers.get("x-lark-signature"):
            verify_lark_signature(encrypt_key, headers, body, now)
        event = _json_object(lark_decrypt(encrypt_key, str(outer["encrypt"])), "encrypt")
        # the url_verification challenge is unsigned; a card action must be signed
        if event.get("type") != "url_verification" and not headers.get("x-lark-signature"):
            raise CallbackRefused("missing X-Lark-Signature")
    else:
        event = outer
    given = event.get("header", {}).get("token") or event.get("token", "")
    if token and not hmac.compare_digest(str(given), token):
        raise CallbackRefused("verification token does not match (feishu verification token?)")
    return event


@dataclass(frozen=True)
class LinkClaim:
    """What a signed link lets its holder do once: ``action`` on ``rec_id`` as ``user``."""

    action: str
    rec_id: str
    user: str
    expires_at: float


def sign_link(secret: str, claim: LinkClaim) -> str:
    data = json.dumps(
        {"a": claim.action, "r": claim.rec_id, "u": claim.user, "e": int(claim.expires_at)},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    mac = hmac.new(secret.encode(), data, hashlib.sha256).digest()
    return f"{_b64(data)}.{_b64(mac)}"


def read_link(secret: str, token: str, now: float) -> LinkClaim:
    """The claim of a link gpufleet signed; CallbackRefused when forged or expired."""
    head, _, tail = token.partition(".")
    try:
        data, mac = _unb64(head), _unb64(tail)
    except (binascii.Error, ValueError) as err:
        raise CallbackRefused("link: malformed") from err
    if not hmac.compare_digest(hmac.new(secret.encode(), data, hashlib.sha256).digest(), mac):
        raise CallbackRefused("link: the signature does not match (forged or altered)")
    raw = _json_object(data, "link")
    try:
        claim = LinkClaim(str(raw["a"]), str(raw["r"]), str(raw["u"]), float(raw["e"]))
    except (KeyError, TypeError, ValueError) as err:
        raise CallbackRefused("link: malformed claim") from err
    if now > claim.expires_at:
        raise CallbackRefused("link: expired; use the buttons of a newer message")
    return claim


def _fresh(timestamp: int, now: float, window_seconds: float, header: str) -> None:
    if abs(now - timestamp) > window_seconds:
        raise CallbackRefused(
            f"{header} is {now - timestamp:+.0f} s from now, outside the "
            f"{window_seconds:.0f} s window (replayed, or a clock is off)"
        )


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise CallbackRefused(f"{what}: not JSON") from err
    if not isinstance(value, dict):
        raise CallbackRefused(f"{what}: not a JSON object")
    return value


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
