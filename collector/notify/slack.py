"""Slack incoming webhook: Block Kit with a top-level ``text`` fallback; success is HTTP 200
with the body ``ok`` (anything else is a plain-text error such as ``invalid_payload``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collector.notify.messages import Mention, Section, Text, as_markdown
from collector.notify.settings import Channel
from collector.notify.vendor import (
    JSON_HEADERS,
    Request,
    SendOutcome,
    Service,
    Verdict,
    classify_http,
    json_body,
    short,
)

MAX_BLOCKS = 50
MAX_FIELDS_PER_SECTION = 10
MAX_SECTION_CHARS = 3000


def escape(text: str) -> str:
    """Slack mrkdwn needs &, < and > escaped (its own link syntax uses < and >)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def blocks(text: Text) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": text.title[:150]}}
    ]
    for section in text.sections:
        out += _section_blocks(section)
    if text.mentions:
        out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": mentions(text)}]})
    if text.links:
        buttons = [
            {"type": "button", "text": {"type": "plain_text", "text": label}, "url": url}
            for label, url in text.links
        ]
        out.append({"type": "actions", "elements": buttons})
    if text.answers:
        out.append(answer_block(text))
    return out


#: the block that holds the answer buttons; an answer's update replaces it (answers route)
ANSWER_BLOCK_ID = "gpufleet_answers"
ANSWER_STYLES = {"keep": "primary", "release": "danger"}


def answer_block(text: Text) -> dict[str, Any]:
    """Block Kit buttons whose press Slack posts to ``/v1/answers/slack``."""
    buttons = []
    for b in text.answers:
        button = {
            "type": "button",
            "action_id": f"gpufleet_{b.action}",
            "text": {"type": "plain_text", "text": b.label},
            "value": b.rec_id,
        }
        if b.action in ANSWER_STYLES:
            button["style"] = ANSWER_STYLES[b.action]
        buttons.append(button)
    return {"type": "actions", "block_id": ANSWER_BLOCK_ID, "elements": buttons}


def mention(m: Mention) -> str:
    """``<@U123>`` for a member, ``<!subteam^S123>`` for a user group (ids start with S)."""
    return f"<!subteam^{m.id}>" if m.id.startswith("S") else f"<@{m.id}>"


def mentions(text: Text) -> str:
    return " ".join(mention(m) for m in text.mentions)


def _link(label: str, url: str) -> str:
    return f"<{url}|{escape(label)}>"


def _section_blocks(section: Section) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if section.heading:
        heading = f"*{escape(section.heading)}*"[:MAX_SECTION_CHARS]
        out.append({"type": "section", "text": {"type": "mrkdwn", "text": heading}})
    fields = [
        {"type": "mrkdwn", "text": f"*{escape(label)}*\n{escape(value)}"[:2000]}
        for label, value in section.fields
    ]
    for start in range(0, len(fields), MAX_FIELDS_PER_SECTION):
        out.append({"type": "section", "fields": fields[start : start + MAX_FIELDS_PER_SECTION]})
    if section.command:
        label, command = section.command
        code = f"*{escape(label)}*\n```{escape(command)}```"[:MAX_SECTION_CHARS]
        out.append({"type": "section", "text": {"type": "mrkdwn", "text": code}})
    if section.links:
        links = " | ".join(_link(label, url) for label, url in section.links)
        out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": links}]})
    return out


def build(text: Text, channel: Channel, now: float) -> Request:
    fallback = as_markdown(text, bold="*", link=_link)
    if text.mentions:  # the fallback is what notifications show: the owner is in it
        fallback = f"{mentions(text)} {fallback}"
    payload = {"text": fallback[:MAX_SECTION_CHARS], "blocks": blocks(text)}
    return Request(channel.url, json_body(payload), dict(JSON_HEADERS))


def interpret(status: int, headers: Mapping[str, str], body: bytes) -> SendOutcome:
    verdict = classify_http(status, headers, frozenset({200}))
    if verdict is not None:
        detail = f"{verdict.detail} {short(body.decode(errors='replace'))}".strip()
        return SendOutcome(verdict.verdict, verdict.retry_after_seconds, detail)
    if body.strip() == b"ok":
        return SendOutcome(Verdict.OK)
    return SendOutcome(Verdict.PERMANENT, None, short(body.decode(errors="replace")))


def fits(text: Text, channel: Channel) -> bool:
    return len(blocks(text)) <= MAX_BLOCKS


SERVICE = Service(build, interpret, fits)
