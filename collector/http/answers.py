"""Answers from chat: ``POST /v1/answers/slack``, ``POST /v1/answers/feishu``, ``/ui/answer``.

These routes carry no bearer token: each request is authenticated by its signature
(collector/notify/callbacks.py). A forged, replayed or malformed one is answered 401 and
nothing is done. A genuine press goes to the ``AnswerDesk`` (collector/actions/answers.py)
and the message is updated in place: Slack through the interaction's ``response_url``
(the answer replaces the buttons; a refusal goes to the presser alone), Feishu/Lark in the
callback's own response (a toast, and the answered card). Signed links open a confirm
page; only its POST acts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

import httpx
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from collector.actions.answers import Answer, AnswerDesk, Reply
from collector.http.answer_page import confirm_page, result_page
from collector.http.responses import error_response
from collector.notify.answer_settings import AnswerSecrets
from collector.notify.bot_auth import BotTokenVerifier
from collector.notify.buttons import LABELS
from collector.notify.callbacks import CallbackRefused, lark_event, read_link, verify_slack
from collector.notify.feishu import answered_card
from collector.notify.slack import ANSWER_BLOCK_ID, escape
from collector.notify.teams import answered_card as teams_answered_card

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 256 * 1024
SLACK_ACTIONS = {
    "gpufleet_keep": "keep",
    "gpufleet_release": "release",
    "gpufleet_dismiss": "dismiss",
}


class AnswerRoutes:
    def __init__(
        self,
        desk: AnswerDesk,
        secrets: AnswerSecrets,
        transport: httpx.BaseTransport,
        clock: Callable[[], float],
        wall_clock: Callable[[], float] = time.time,
        languages: Mapping[str, str] | None = None,
        teams: BotTokenVerifier | None = None,
    ) -> None:
        """``clock``: the collector's (the demo's is simulated), for what an answer does;
        ``wall_clock``: the services', for the signed timestamps' replay window;
        ``languages``: service -> the replies' language (answer_phrases.reply_languages)."""
        self.languages = dict(languages or {})
        #: verifies the Bot Framework's tokens on the Teams bot endpoint (bot_auth.py)
        self.teams = teams
        self.desk = desk
        self.secrets = secrets
        self.transport = transport
        self.clock = clock
        self.wall_clock = wall_clock

    def routes(self) -> list[BaseRoute]:
        out: list[BaseRoute] = []
        if self.secrets.slack_signing_secret:
            out.append(Route("/v1/answers/slack", self.slack, methods=["POST"]))
        if self.secrets.feishu_verification_token or self.secrets.feishu_encrypt_key:
            out.append(Route("/v1/answers/feishu", self.feishu, methods=["POST"]))
        if self.secrets.link_secret:
            out.append(Route("/ui/answer", self.link, methods=["GET", "POST"]))
        if self.teams is not None:
            out.append(Route("/v1/answers/teams", self.teams_invoke, methods=["POST"]))
        return out

    # -- Slack ----------------------------------------------------------------------------

    async def slack(self, request: Request) -> Response:
        body = await request.body()
        try:
            if len(body) > MAX_BODY_BYTES:
                raise CallbackRefused(f"body over {MAX_BODY_BYTES} bytes")
            secret = self.secrets.slack_signing_secret
            verify_slack(secret, request.headers, body, self.wall_clock())
            payload = _slack_payload(body)
        except CallbackRefused as err:
            return _refused(err, "X-Slack-Signature")
        action = (payload.get("actions") or [{}])[0]
        kind = SLACK_ACTIONS.get(str(action.get("action_id", "")))
        if payload.get("type") != "block_actions" or kind is None:
            return Response(status_code=200)  # not one of our buttons
        user = str(payload.get("user", {}).get("id", ""))
        press = f"slack:{user}:{action.get('action_ts', '')}:{payload.get('trigger_id', '')}"
        value = str(action.get("value", ""))
        answer = Answer(press, "slack", user, kind, value, language=self._language("slack"))
        reply = await run_in_threadpool(self.desk.answer, answer, self.clock())
        url = payload.get("response_url")
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            update = slack_update(payload, reply)
            await run_in_threadpool(self._post, url, update)
        return Response(status_code=200)

    def _post(self, url: str, payload: dict[str, Any]) -> None:
        request = httpx.Request("POST", url, json=payload, extensions={"timeout": _TIMEOUT})
        try:
            self.transport.handle_request(request).close()
        except httpx.HTTPError as err:  # the URL holds a token: the type only
            log.warning("updating a Slack message failed: %s", type(err).__name__)

    def _language(self, service: str) -> str:
        return self.languages.get(service, "en")

    # -- Feishu / Lark --------------------------------------------------------------------

    async def feishu(self, request: Request) -> Response:
        body = await request.body()
        s = self.secrets
        try:
            if len(body) > MAX_BODY_BYTES:
                raise CallbackRefused(f"body over {MAX_BODY_BYTES} bytes")
            event = lark_event(
                body,
                request.headers,
                s.feishu_verification_token,
                s.feishu_encrypt_key,
                self.wall_clock(),
            )
        except CallbackRefused as err:
            return _refused(err, "X-Lark-Signature")
        if event.get("type") == "url_verification":
            return JSONResponse({"challenge": event.get("challenge", "")})
        inner = event.get("event", event)
        value = inner.get("action", {}).get("value", {})
        if not isinstance(value, dict) or "gpufleet" not in value:
            return JSONResponse({})  # not one of our buttons
        operator = inner.get("operator", {})
        user = str(operator.get("open_id") or inner.get("open_id", ""))
        press = str(event.get("header", {}).get("event_id") or inner.get("token", ""))
        answer = Answer(
            f"feishu:{press}",
            "feishu",
            user,
            str(value["gpufleet"]),
            str(value.get("rec", "")),
            language=self._language("feishu"),
        )
        reply = await run_in_threadpool(self.desk.answer, answer, self.clock())
        if reply.refused:
            return JSONResponse({"toast": {"type": "error", "content": reply.text}})
        card = answered_card(reply.title, reply.text)
        toast = {"type": "success", "content": reply.text}
        return JSONResponse({"toast": toast, "card": {"type": "raw", "data": card}})

    # -- Teams, through the bot (Universal Actions: adaptiveCard/action invokes) ------------

    async def teams_invoke(self, request: Request) -> Response:
        body = await request.body()
        verifier = self.teams
        if verifier is None:  # the route exists only with a verifier
            return Response(status_code=404)
        try:
            if len(body) > MAX_BODY_BYTES:
                raise CallbackRefused(f"body over {MAX_BODY_BYTES} bytes")
            activity = _json_object(body)
            auth = request.headers.get("authorization", "")
            await run_in_threadpool(verifier.verify, auth, activity)
        except CallbackRefused as err:
            return _refused(err, "Authorization")
        action = activity.get("value", {}).get("action", {})
        data = action.get("data", {}) if isinstance(action, dict) else {}
        if activity.get("name") != "adaptiveCard/action" or not isinstance(data, dict):
            return Response(status_code=200)  # not one of our buttons
        sender = activity.get("from", {})
        user = str(sender.get("aadObjectId") or sender.get("id", ""))
        answer = Answer(
            f"teams:{activity.get('id', '')}",
            "teams",
            user,
            str(action.get("verb") or data.get("gpufleet", "")),
            str(data.get("rec", "")),
            language=self._language("teams"),
        )
        reply = await run_in_threadpool(self.desk.answer, answer, self.clock())
        if reply.refused:
            kind, value = "application/vnd.microsoft.activity.message", reply.text
            return JSONResponse({"statusCode": 200, "type": kind, "value": value})
        card = teams_answered_card(reply.title, reply.text)
        kind = "application/vnd.microsoft.card.adaptive"
        return JSONResponse({"statusCode": 200, "type": kind, "value": card})

    # -- signed links ---------------------------------------------------------------------

    async def link(self, request: Request) -> Response:
        if request.method == "GET":
            token = request.query_params.get("t", "")
        else:
            form = parse_qs((await request.body())[:MAX_BODY_BYTES].decode(errors="replace"))
            token = (form.get("t") or [""])[0]
        try:
            claim = read_link(self.secrets.link_secret, token, self.clock())
        except CallbackRefused as err:
            return _html(result_page("Link not accepted", str(err), True), 403)
        if request.method == "GET":
            rec = await run_in_threadpool(self.desk.desk.ledger.get_recommendation, claim.rec_id)
            subject = rec.title if rec is not None else claim.rec_id
            page = confirm_page(claim.action, self._label(claim.action), subject, claim.user, token)
            return _html(page)
        press = "link:" + hashlib.sha256(token.encode()).hexdigest()[:32]
        answer = Answer(press, "link", claim.user, claim.action, claim.rec_id, who=claim.user)
        reply = await run_in_threadpool(self.desk.answer, answer, self.clock())
        heading = "Not done" if reply.refused else "Done"
        status = 403 if reply.outcome == "refused" else 200
        return _html(result_page(heading, reply.text, reply.refused), status)

    def _label(self, action: str) -> str:
        hours = self.desk.desk.settings.keep_seconds / 3600.0
        return LABELS["en"].get(action, action).format(hours=hours)


#: the page acts on a POST: never framed (clickjacking), no script, the token in its URL
#: never sent on as a referrer, never cached
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _html(page: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(page, status, headers=PAGE_HEADERS)


_TIMEOUT = dict.fromkeys(("connect", "read", "write", "pool"), 10.0)


def slack_update(payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The ``response_url`` body: the message without its buttons and with the answer;
    a refusal only to the person who pressed (ephemeral), the message unchanged."""
    if reply.refused:
        return {"response_type": "ephemeral", "replace_original": False, "text": reply.text}
    blocks = payload.get("message", {}).get("blocks", [])
    kept = [b for b in blocks if b.get("block_id") != ANSWER_BLOCK_ID]
    answered = {"type": "section", "text": {"type": "mrkdwn", "text": escape(reply.text)}}
    return {"replace_original": True, "text": reply.text, "blocks": [*kept, answered]}


def _slack_payload(body: bytes) -> dict[str, Any]:
    form = parse_qs(body.decode(errors="replace"))
    try:
        payload = json.loads(form["payload"][0])
    except (KeyError, IndexError, ValueError) as err:
        raise CallbackRefused("body: no JSON payload field") from err
    if not isinstance(payload, dict):
        raise CallbackRefused("payload: not a JSON object")
    return payload


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        activity = json.loads(body)
    except ValueError as err:
        raise CallbackRefused("body: not JSON") from err
    if not isinstance(activity, dict):
        raise CallbackRefused("body: not a JSON object")
    return activity


def _refused(err: CallbackRefused, header: str) -> Response:
    log.info("answer refused: %s", err)
    return error_response(401, str(err), header, "bad_signature")
