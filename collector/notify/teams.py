"""Microsoft Teams through a Workflows webhook: one Adaptive Card 1.4 attachment.

The URL is opaque (the host moved from logic.azure.com to powerplatform.com in 2025), so it
is never host-checked. 202 Accepted (or 200) is success; the flow runs asynchronously, so
202 does not prove the card was posted. About 28 KB per message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collector.notify.messages import Section, Text
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

MAX_BYTES = 28 * 1000
COLOURS = {"critical": "attention", "warning": "warning", "info": "accent"}


def card(text: Text) -> dict[str, Any]:
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": text.title,
            "weight": "bolder",
            "size": "medium",
            "wrap": True,
            "color": COLOURS.get(text.severity, "default"),
        },
    ]
    for section in text.sections:
        if section.heading:
            body.append(
                {"type": "TextBlock", "text": section.heading, "weight": "bolder", "wrap": True}
            )
        facts = [{"title": label, "value": value} for label, value in section.fields]
        body.append({"type": "FactSet", "facts": facts})
        body += _command_and_links(section)
    content: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
        "msteams": {"width": "full"},
    }
    if text.mentions:
        tags = " ".join(f"<at>{m.name or m.id}</at>" for m in text.mentions)
        body.append({"type": "TextBlock", "text": tags, "wrap": True})
        content["msteams"]["entities"] = [
            {
                "type": "mention",
                "text": f"<at>{m.name or m.id}</at>",
                "mentioned": {"id": m.id, "name": m.name or m.id},
            }
            for m in text.mentions
        ]
    if text.links:
        content["actions"] = [
            {"type": "Action.OpenUrl", "title": label, "url": url} for label, url in text.links
        ]
    if text.answers:  # through the bot (answers.teams_bot_app_id): invokes to /v1/answers/teams
        content.setdefault("actions", []).extend(
            {
                "type": "Action.Execute",
                "title": a.label,
                "verb": a.action,
                "data": {"gpufleet": a.action, "rec": a.rec_id},
            }
            for a in text.answers
        )
    return content


def _command_and_links(section: Section) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if section.command:
        label, command = section.command
        out.append({"type": "TextBlock", "text": label, "weight": "bolder", "wrap": True})
        out.append({"type": "TextBlock", "text": command, "fontType": "Monospace", "wrap": True})
    if section.links:
        links = " | ".join(f"[{label}]({url})" for label, url in section.links)
        out.append({"type": "TextBlock", "text": links, "wrap": True})
    return out


def _payload(text: Text) -> dict[str, Any]:
    attachment = {
        "contentType": "application/vnd.microsoft.card.adaptive",
        "contentUrl": None,
        "content": card(text),
    }
    return {"type": "message", "attachments": [attachment]}


def build(text: Text, channel: Channel, now: float) -> Request:
    return Request(channel.url, json_body(_payload(text)), dict(JSON_HEADERS))


def interpret(status: int, headers: Mapping[str, str], body: bytes) -> SendOutcome:
    verdict = classify_http(status, headers, frozenset({200, 202}))
    return verdict if verdict is not None else SendOutcome(Verdict.OK)


def fits(text: Text, channel: Channel) -> bool:
    return len(json_body(_payload(text))) <= MAX_BYTES


SERVICE = Service(build, interpret, fits)


def answered_card(title: str, answer: str) -> dict[str, Any]:
    """The card an answered message becomes (its buttons gone): what it was, what was done."""
    return {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {"type": "TextBlock", "text": title, "weight": "bolder", "wrap": True},
            {"type": "TextBlock", "text": answer, "wrap": True},
        ],
    }
