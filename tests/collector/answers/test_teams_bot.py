"""Teams answers through a bot: Adaptive Card ``Action.Execute`` buttons, and the bot's
endpoint verifying Bot Framework tokens by the real path (OpenID metadata -> JWKS -> RS256,
PyJWT over ``cryptography``). The internet is out of reach, so a loopback HTTP server
serves the OpenID metadata and a JWKS, and the tests sign tokens with a generated RSA key;
a forged, expired, misaddressed or unendorsed token is refused, and nothing is done."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette

from collector.actions.answer_log import AnswerLog
from collector.actions.answers import AnswerDesk, Desk
from collector.actions.engine import Executors
from collector.actions.settings import ActionSettings
from collector.http.answers import AnswerRoutes
from collector.ledger.store import Ledger
from collector.notify.answer_phrases import reply_languages
from collector.notify.answer_settings import AnswerSecrets, AnswerSettings
from collector.notify.bot_auth import ISSUER, BotTokenVerifier
from collector.notify.directory import Directory
from collector.notify.messages import AnswerButton, Text
from collector.notify.settings import ContactSettings
from collector.notify.teams import card
from collector.records import (
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)
from tests.collector.http.test_app import served

APP_ID = "7f1d2c3b-0000-4000-8000-00000000b07"
SERVICE_URL = "https://smba.trafficmanager.net/emea/"
POD = WorkloadRef("pod:ml/nb", "kubernetes_pod", "nb", "ml", "vision", "alice")
REC_ID = f"release_idle:{POD.key}"
NOW = 1e9


class OpenIdServer:
    """Bot Framework's OpenID metadata and JWKS, on loopback."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self.jwks = jwks
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                base = f"http://127.0.0.1:{self.server.server_address[1]}"
                metadata = {
                    "issuer": ISSUER,
                    "jwks_uri": f"{base}/keys",
                    "id_token_signing_alg_values_supported": ["RS256"],
                }
                body = json.dumps(owner.jwks if self.path == "/keys" else metadata).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/openid"


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def skype_key() -> rsa.RSAPrivateKey:
    """A key in the JWKS endorsed for another channel (Skype), not for Teams."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk_of(key: rsa.RSAPrivateKey, kid: str, endorsements: list[str]) -> dict[str, Any]:
    public: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**public, "kid": kid, "use": "sig", "endorsements": endorsements}


def token(key: rsa.RSAPrivateKey, kid: str = "k1", **claims: Any) -> str:
    now = time.time()
    body = {"iss": ISSUER, "aud": APP_ID, "exp": now + 600, "nbf": now - 10,
            "serviceUrl": SERVICE_URL, **claims}  # fmt: skip
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


def invoke(verb: str, activity_id: str, aad: str = "aad-alice") -> dict[str, Any]:
    return {
        "type": "invoke",
        "name": "adaptiveCard/action",
        "id": activity_id,
        "channelId": "msteams",
        "serviceUrl": SERVICE_URL,
        "from": {"id": "29:1abc", "aadObjectId": aad},
        "value": {"action": {"type": "Action.Execute", "verb": verb, "data": {"rec": REC_ID}}},
    }


@pytest.fixture
def bot(
    tmp_path: Path, key: rsa.RSAPrivateKey, skype_key: rsa.RSAPrivateKey
) -> Iterator[tuple[httpx.Client, Ledger]]:
    with bot_on(tmp_path, key, skype_key, {}) as served_bot:
        yield served_bot


@contextmanager
def bot_on(
    tmp_path: Path, key: rsa.RSAPrivateKey, skype_key: rsa.RSAPrivateKey, languages: dict[str, str]
) -> Iterator[tuple[httpx.Client, Ledger]]:
    """The bot endpoint served on loopback, with the replies' ``languages`` by service."""
    openid = OpenIdServer(
        {"keys": [jwk_of(key, "k1", ["msteams"]), jwk_of(skype_key, "k2", ["skype"])]}
    )
    rec = Recommendation(
        id=REC_ID, kind=RecommendationKind.RELEASE_IDLE, subject=POD.key,
        title="Release 1 idle H100", evidence={}, savings=Savings(100.0, 10.0, 4.0, "USD"),
        status=RecommendationStatus.OPEN, opened_at=NOW, updated_at=NOW, gpu_uuids=("G1",),
        node="n1", workload_key=POD.key, namespace="ml",
    )  # fmt: skip
    held = GpuView("G1", "n1", 0, "H100", "NVIDIA H100", GpuState.ALLOCATED_IDLE, NOW, (POD,))
    users = {
        "alice": ContactSettings(team="vision", teams="aad-alice"),
        "carol": ContactSettings(team="speech", teams="aad-carol"),
    }
    transport = httpx.HTTPTransport()
    verifier = BotTokenVerifier(APP_ID, openid.url, transport)
    with Ledger.open(str(tmp_path / "l.db")) as ledger:
        ledger.upsert_recommendations([rec])
        desk = Desk(AnswerSettings(), ActionSettings(), ledger, Directory(users), Executors(),
                    lambda now: [held])  # fmt: skip
        secrets = AnswerSecrets(teams_bot_app_id=APP_ID)
        routes = AnswerRoutes(
            AnswerDesk(desk), secrets, transport, lambda: NOW, languages=languages, teams=verifier
        )
        with served(Starlette(routes=routes.routes())) as client:
            yield client, ledger
    openid.server.shutdown()
    openid.server.server_close()
    transport.close()


def post(client: httpx.Client, activity: dict[str, Any], auth: str) -> httpx.Response:
    return client.post("/v1/answers/teams", json=activity, headers={"Authorization": auth})


def test_cards_carry_action_execute_buttons_for_the_bot() -> None:
    answers = tuple(AnswerButton(a, a.title(), REC_ID) for a in ("keep", "release", "dismiss"))
    text = Text(title="Release 1 idle H100", severity="warning", sections=(), answers=answers)
    actions = card(text)["actions"]
    assert [(a["type"], a["verb"], a["data"]) for a in actions] == [
        ("Action.Execute", v, {"gpufleet": v, "rec": REC_ID})
        for v in ("keep", "release", "dismiss")
    ]


def test_a_verified_keep_is_done_and_the_card_answered(
    bot: tuple[httpx.Client, Ledger], key: rsa.RSAPrivateKey
) -> None:
    client, ledger = bot
    response = post(client, invoke("keep", "act-1"), f"Bearer {token(key)}")
    assert response.status_code == 200
    body = response.json()
    assert body["statusCode"] == 200 and body["type"] == "application/vnd.microsoft.card.adaptive"
    texts = [b["text"] for b in body["value"]["body"]]
    assert texts[0] == "Release 1 idle H100" and texts[1].startswith("Kept for 4 h by alice")
    assert AnswerLog(ledger).kept_until(POD.key, NOW) == NOW + 4 * 3600
    # the same invoke again (Teams retries): nothing more done
    again = post(client, invoke("keep", "act-1"), f"Bearer {token(key)}").json()
    assert again["type"] == "application/vnd.microsoft.activity.message"
    assert "already received" in again["value"]


def test_a_stranger_is_refused_saying_why(
    bot: tuple[httpx.Client, Ledger], key: rsa.RSAPrivateKey
) -> None:
    client, ledger = bot
    body = post(client, invoke("release", "act-2", aad="aad-carol"), f"Bearer {token(key)}").json()
    assert body["type"] == "application/vnd.microsoft.activity.message"
    assert "carol may not release pod ml/nb: it belongs to user alice" in body["value"]
    assert AnswerLog(ledger).kept_until(POD.key, NOW) is None


@pytest.mark.parametrize(
    ("why", "make"),
    [
        ("no token", lambda k, o: ""),
        ("another key's signature", lambda k, o: "Bearer " + token(o)),
        ("expired", lambda k, o: "Bearer " + token(k, exp=time.time() - 3600)),
        ("another bot's token", lambda k, o: "Bearer " + token(k, aud="someone-else")),
        ("another issuer", lambda k, o: "Bearer " + token(k, iss="https://evil.example")),
        ("another service URL", lambda k, o: "Bearer " + token(k, serviceUrl="https://x.example/")),
        ("a key not endorsed for Teams", lambda k, o: "Bearer " + token(o, kid="k2")),
        ("a key not in the JWKS", lambda k, o: "Bearer " + token(k, kid="k9")),
    ],
)
def test_bad_tokens_are_refused_and_nothing_is_done(
    bot: tuple[httpx.Client, Ledger],
    key: rsa.RSAPrivateKey,
    skype_key: rsa.RSAPrivateKey,
    why: str,
    make: Any,
) -> None:
    client, ledger = bot
    response = post(client, invoke("keep", f"act-{why}"), make(key, skype_key))
    assert response.status_code == 401, why
    assert AnswerLog(ledger).answers() == [], why


def test_replies_are_in_chinese_where_the_teams_channels_are_zh(
    tmp_path: Path, key: rsa.RSAPrivateKey, skype_key: rsa.RSAPrivateKey
) -> None:
    languages = reply_languages([("teams", "zh")])
    with bot_on(tmp_path, key, skype_key, languages) as (client, _):
        kept = post(client, invoke("keep", "zh-1"), f"Bearer {token(key)}").json()
        refused = post(client, invoke("release", "zh-2", "aad-carol"), f"Bearer {token(key)}")
    assert kept["value"]["body"][1]["text"].startswith("alice 已保留 4 小时")
    assert refused.json()["value"].startswith("已拒绝：carol 无权对 Pod ml/nb 执行“立即释放”")
