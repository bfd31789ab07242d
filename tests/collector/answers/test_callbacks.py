"""The callback checks against the services' own documented test vectors, and every way a
request can be refused: a bad signature, a replayed timestamp, a forged or expired link."""

from __future__ import annotations

import json

import pytest

from collector.notify.callbacks import (
    CallbackRefused,
    LinkClaim,
    lark_decrypt,
    lark_encrypt,
    lark_event,
    lark_signature,
    read_link,
    sign_link,
    slack_signature,
    verify_slack,
)

# api.slack.com/authentication/verifying-requests-from-slack: the worked example
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TS = "1531420618"
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
    b"collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F3977008"
    b"85554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c4"
    b"47fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def slack_headers(ts: str = SLACK_TS, sig: str = SLACK_SIGNATURE) -> dict[str, str]:
    return {"x-slack-request-timestamp": ts, "x-slack-signature": sig}


def test_slack_signature_matches_slacks_documented_example() -> None:
    assert slack_signature(SLACK_SECRET, SLACK_TS, SLACK_BODY) == SLACK_SIGNATURE
    verify_slack(SLACK_SECRET, slack_headers(), SLACK_BODY, now=int(SLACK_TS) + 299)


@pytest.mark.parametrize(
    ("headers", "body", "now", "says"),
    [
        (slack_headers(), SLACK_BODY + b"&x=1", int(SLACK_TS), "does not match"),
        (slack_headers(sig="v0=" + "0" * 64), SLACK_BODY, int(SLACK_TS), "does not match"),
        (slack_headers(), SLACK_BODY, int(SLACK_TS) + 301, "outside the 300 s window"),
        (slack_headers(), SLACK_BODY, int(SLACK_TS) - 301, "outside the 300 s window"),
        ({"x-slack-signature": SLACK_SIGNATURE}, SLACK_BODY, int(SLACK_TS), "missing"),
    ],
)
def test_slack_refuses_altered_forged_replayed_and_unsigned(
    headers: dict[str, str], body: bytes, now: float, says: str
) -> None:
    with pytest.raises(CallbackRefused, match=says):
        verify_slack(SLACK_SECRET, headers, body, now)


def test_lark_decrypts_its_documented_example() -> None:
    # open.feishu.cn "Encryption": encrypt key "test key", the sample cipher text
    assert lark_decrypt("test key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=") == (
        b"hello world"
    )
    with pytest.raises(CallbackRefused, match="does not decrypt"):
        lark_decrypt("another key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=")


def signed_lark(key: str, event: dict[str, object], ts: int) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"encrypt": lark_encrypt(key, json.dumps(event).encode(), bytes(16))})
    raw = body.encode()
    headers = {
        "x-lark-request-timestamp": str(ts),
        "x-lark-request-nonce": "n0nce",
        "x-lark-signature": lark_signature(str(ts), "n0nce", key, raw),
    }
    return raw, headers


def test_lark_event_is_decrypted_signed_and_tokened() -> None:
    event = {"schema": "2.0", "header": {"token": "vtok", "event_id": "e1"}, "event": {}}
    body, headers = signed_lark("ekey", event, 1_790_000_000)
    assert lark_event(body, headers, "vtok", "ekey", 1_790_000_100) == event
    with pytest.raises(CallbackRefused, match="verification token"):
        lark_event(body, headers, "other-token", "ekey", 1_790_000_100)
    with pytest.raises(CallbackRefused, match="window"):
        lark_event(body, headers, "vtok", "ekey", 1_790_000_301)
    tampered = body.replace(b'"encrypt": "', b'"encrypt": "A')
    with pytest.raises(CallbackRefused, match="X-Lark-Signature does not match"):
        lark_event(tampered, headers, "vtok", "ekey", 1_790_000_100)
    unsigned = {k: v for k, v in headers.items() if k != "x-lark-signature"}
    with pytest.raises(CallbackRefused, match="missing X-Lark-Signature"):
        lark_event(body, unsigned, "vtok", "ekey", 1_790_000_100)
    with pytest.raises(CallbackRefused, match="must be encrypted"):
        lark_event(json.dumps(event).encode(), headers, "vtok", "ekey", 1_790_000_100)


def test_lark_url_verification_plain_and_encrypted() -> None:
    plain = {"challenge": "ajls384kdjx98XX", "token": "vtok", "type": "url_verification"}
    assert lark_event(json.dumps(plain).encode(), {}, "vtok", "", 0)["challenge"] == (
        "ajls384kdjx98XX"
    )
    body = json.dumps({"encrypt": lark_encrypt("ekey", json.dumps(plain).encode(), bytes(16))})
    assert lark_event(body.encode(), {}, "vtok", "ekey", 0)["type"] == "url_verification"


def test_signed_links_round_trip_and_refuse_forgery_and_expiry() -> None:
    claim = LinkClaim("keep", "release_idle:pod:ml/nb", "alice", 1_790_003_600)
    token = sign_link("link-secret", claim)
    assert read_link("link-secret", token, 1_790_000_000) == claim
    with pytest.raises(CallbackRefused, match="forged or altered"):
        read_link("another-secret", token, 1_790_000_000)
    _, _, tail = token.partition(".")
    evil = sign_link("guess", LinkClaim("release", claim.rec_id, "alice", claim.expires_at))
    with pytest.raises(CallbackRefused, match="forged or altered"):
        read_link("link-secret", f"{evil.partition('.')[0]}.{tail}", 1_790_000_000)
    with pytest.raises(CallbackRefused, match="expired"):
        read_link("link-secret", token, 1_790_003_601)
    with pytest.raises(CallbackRefused, match="malformed"):
        read_link("link-secret", "not-a-token!", 1_790_000_000)
