"""One local HTTP server per chat service that checks what a real one checks and answers
the way it answers (deploy-notify.md §1.1): Slack 200 ``ok`` / 400 text; Teams 202;
Feishu/Lark, DingTalk, WeCom HTTP 200 with a JSON error code; Discord 204.

``script`` forces the next answers (429 with Retry-After, 5xx ...). ``received`` keeps
every request with the verdict of the checks; ``accepted`` only the ones taken;
``unanswered`` counts the answers whose sender had gone before they were written.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.collector.notify.signing import (
    dingtalk_sign_query,
    feishu_sign,
    standard_webhooks_signature,
)

Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Received:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    answer: Answer

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def ok(self) -> bool:
        status, _, body = self.answer
        if status in (202, 204):
            return True
        if status != 200:
            return False
        if body == b"ok":
            return True
        data = json.loads(body or b"{}")
        return data.get("code", data.get("errcode", 0)) == 0


def _json(status: int, payload: dict[str, Any]) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


@dataclass
class FakeService:
    kind: str
    secret: str = ""
    #: DingTalk's 20 messages a minute, judged by the signed timestamps (the sender's clock)
    rate_per_minute: int = 20
    received: list[Received] = field(default_factory=list)
    script: deque[Answer] = field(default_factory=deque)
    now: Callable[[], float] = time.time
    token: str = "T0KEN-s3cr3t-9f8e7d"
    #: answers that could not be written: the sender closed first (killed, or timed out)
    unanswered: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        paths = {
            "dingtalk": f"/robot/send?access_token={self.token}",
            "wecom": f"/cgi-bin/webhook/send?key={self.token}",
            "feishu": f"/open-apis/bot/v2/hook/{self.token}",
            "lark": f"/open-apis/bot/v2/hook/{self.token}",
            "slack": f"/services/T000/B000/{self.token}",
            "discord": f"/api/webhooks/123/{self.token}",
            "teams": f"/workflows/abc/triggers/manual/paths/invoke?sig={self.token}",
        }
        return f"http://127.0.0.1:{port}{paths.get(self.kind, '/hook/' + self.token)}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def accepted(self) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.ok]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                split = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(split.query).items()}
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer = fake.answer(split.path, query, headers, body)
                with fake._lock:
                    fake.received.append(Received(split.path, query, headers, body, answer))
                status, answer_headers, answer_body = answer
                self.send_response(status)
                for name, value in answer_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer_body)))
                try:
                    self.end_headers()
                    self.wfile.write(answer_body)
                except (BrokenPipeError, ConnectionResetError):  # the sender is gone
                    with fake._lock:
                        fake.unanswered += 1

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def answer(
        self, path: str, query: dict[str, str], headers: dict[str, str], body: bytes
    ) -> Answer:
        if self.script:
            return self.script.popleft()
        if self.token not in path and self.token not in query.values():
            return 404, {}, b"no_service"
        check = getattr(self, f"_{self.kind if self.kind != 'lark' else 'feishu'}")
        return check(query, headers, body)  # type: ignore[no-any-return]

    # -- one checker per service ---------------------------------------------------------

    def _slack(self, query: dict[str, str], headers: dict[str, str], body: bytes) -> Answer:
        data = json.loads(body)
        blocks = data.get("blocks", [])
        if not data.get("text") or len(blocks) > 50 or any("type" not in b for b in blocks):
            return 400, {"Content-Type": "text/plain"}, b"invalid_payload"
        if blocks and len(blocks[0]["text"]["text"]) > 150:
            return 400, {"Content-Type": "text/plain"}, b"invalid_blocks"
        return 200, {"Content-Type": "text/plain"}, b"ok"

    def _teams(self, query: dict[str, str], headers: dict[str, str], body: bytes) -> Answer:
        data = json.loads(body)
        attachment = data["attachments"][0]
        card = attachment["content"]
        good = (
            data.get("type") == "message"
            and attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
            and card["type"] == "AdaptiveCard"
            and card["version"] == "1.4"
            and len(body) <= 28 * 1024
        )
        return (202, {}, b"") if good else (400, {}, b"Bad Request")

    def _feishu(self, query: dict[str, str], headers: dict[str, str], body: bytes) -> Answer:
        data = json.loads(body)
        if len(body) > 20 * 1024:
            return _json(200, {"code": 9499, "msg": "Bad Request"})
        if self.secret:
            ts = data.get("timestamp", "")
            fresh = ts.isdigit() and abs(self.now() - int(ts)) <= 3600
            if not fresh or data.get("sign") != feishu_sign(ts, self.secret):
                return _json(
                    200,
                    {
                        "code": 19021,
                        "msg": "sign match fail or timestamp is not "
                        "within one hour from current time",
                    },
                )
        card = data.get("card", {})
        if data.get("msg_type") != "interactive" or card.get("schema") != "2.0":
            return _json(200, {"code": 9499, "msg": "Bad Request"})
        if not card["header"]["title"]["content"] or not card["body"]["elements"]:
            return _json(200, {"code": 9499, "msg": "Bad Request"})
        return _json(200, {"code": 0, "msg": "success", "data": {}})

    def _dingtalk(self, query: dict[str, str], headers: dict[str, str], body: bytes) -> Answer:
        if self.secret:
            ts = query.get("timestamp", "")
            fresh = ts.isdigit() and abs(self.now() * 1000 - int(ts)) <= 3600 * 1000
            if not fresh or query.get("sign") != _unquote_once(
                dingtalk_sign_query(ts, self.secret)
            ):
                return _json(200, {"errcode": 310000, "errmsg": "sign not match"})
            if self._too_fast(int(ts) / 1000):
                return _json(
                    200, {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}
                )
        data = json.loads(body)
        markdown = data.get("markdown", {})
        if data.get("msgtype") != "markdown" or not markdown.get("title"):
            return _json(200, {"errcode": 400402, "errmsg": "missing markdown.title"})
        if not markdown.get("text"):
            return _json(200, {"errcode": 400403, "errmsg": "missing markdown.text"})
        return _json(200, {"errcode": 0, "errmsg": "ok"})

    def _too_fast(self, sent_at: float) -> bool:
        with self._lock:
            recent = [
                r
                for r in self.received
                if r.ok and sent_at - 60 < int(r.query.get("timestamp", 0)) / 1000 <= sent_at
            ]
        return len(recent) >= self.rate_per_minute

    def _wecom(self, query: dict[str, str], headers: dict[str, str], body: bytes) -> Answer:
        data = json.loads(body)
        content = data.get("markdown", {}).get("content", "")
        if data.get("msgtype") != "markdown" or not content:
            return _json(200, {"errcode": 40008, "errmsg": "invalid message type"})
        if len(content.encode("utf-8")) > 4096:
            return _json(
                200, {"errcode": 40058, "errmsg": "markdown.content exceed max length 4096"}
            )
        return _json(200, {"errcode": 0, "errmsg": "ok"})

    def _discord(self, query: dict[str, str], headers: dict[str, str], body: bytes) -> Answer:
        data = json.loads(body)
        embeds = data.get("embeds", [])
        good = (
            0 < len(embeds) <= 10
            and all(len(e.get("title", "")) <= 256 for e in embeds)
            and all(len(e.get("description", "")) <= 4096 for e in embeds)
            and data.get("allowed_mentions", {}).get("parse") == []
            and len(data.get("content", "")) <= 2000
        )
        if not good:
            return _json(400, {"code": 50035, "message": "Invalid Form Body"})
        return 204, {}, b""

    def _webhook(self, query: dict[str, str], headers: dict[str, str], body: bytes) -> Answer:
        msg_id, ts = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
        if not msg_id or not ts.isdigit() or abs(self.now() - int(ts)) > 300:
            return 400, {}, b"missing or old webhook headers"
        expected = standard_webhooks_signature(self.secret, msg_id, ts, body)
        if self.secret and expected not in headers.get("webhook-signature", "").split(" "):
            return 401, {}, b"bad signature"
        return 204, {}, b""


def _unquote_once(value: str) -> str:
    """parse_qs already URL-decoded the query; compare like with like."""
    from urllib.parse import unquote

    return unquote(value)
