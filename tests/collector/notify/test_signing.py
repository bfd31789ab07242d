"""Signature schemes: fixed vectors (computed with ``openssl dgst -hmac``, and for Standard
Webhooks the specification's own example) and agreement with a second implementation."""

from __future__ import annotations

import urllib.parse

import pytest

from collector.notify import dingtalk, feishu, webhook
from tests.collector.notify.signing import (
    dingtalk_sign_query,
    feishu_sign,
    standard_webhooks_signature,
)


def test_feishu_sign_matches_the_fixed_vector() -> None:
    # printf '' | openssl dgst -sha256 -mac HMAC -binary \
    #     -macopt key:"$(printf '1700000000\ntest-secret')" | base64
    assert feishu.sign(1700000000, "test-secret") == "mbm4Y4oluIPQ00qlBIhX8vAZ0EKv3nw0LuTb91jPL84="


def test_dingtalk_sign_matches_the_fixed_vector() -> None:
    # printf '1700000000000\nSECtest' | openssl dgst -sha256 -hmac SECtest -binary | base64
    raw = "aZLLrriXgn05YbwaGR7knYsLeJADjr9NwLaNNKpxh4g="
    assert dingtalk.sign(1700000000000, "SECtest") == urllib.parse.quote_plus(raw)
    assert dingtalk.sign(1700000000000, "SECtest").endswith("%3D")  # URL-encoded base64


def test_standard_webhooks_signature_matches_the_specification_example() -> None:
    body = b'{"test": 2432232314}'
    got = webhook.signature(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body
    )
    assert got == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_feishu_is_not_signed_the_dingtalk_way() -> None:
    # the documented mistake: HMAC keyed with the secret over "timestamp\nsecret"
    assert feishu.sign(1700000000, "SECtest") != urllib.parse.unquote(
        dingtalk.sign(1700000000, "SECtest")
    )


@pytest.mark.parametrize("secret", ["s", "SEC0123456789abcdef", "密钥-with-ünïcode", "x" * 200])
@pytest.mark.parametrize("timestamp", [0, 1, 1700000000, 4102444800])
def test_each_scheme_agrees_with_an_independent_implementation(secret: str, timestamp: int) -> None:
    assert feishu.sign(timestamp, secret) == feishu_sign(str(timestamp), secret)
    assert dingtalk.sign(timestamp * 1000, secret) == dingtalk_sign_query(
        str(timestamp * 1000), secret
    )
    body = f'{{"n": {timestamp}, "s": "{secret}"}}'.encode()
    key = "whsec_" + "c2VjcmV0LWtleS1mb3ItdGVzdHM="
    assert webhook.signature(key, "msg_1", timestamp, body) == standard_webhooks_signature(
        key, "msg_1", str(timestamp), body
    )
    assert webhook.signature(secret, "msg_1", timestamp, body) == standard_webhooks_signature(
        secret, "msg_1", str(timestamp), body
    )
