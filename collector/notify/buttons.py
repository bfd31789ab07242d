"""The answers a release message offers: "Keep for 4 h", "Release now", "Dismiss".

Slack and Feishu/Lark (with their callback secrets in ``answers``) get buttons that call the
collector back; every other service gets the same three as signed links to the console's
confirm page (``/ui/answer?t=...``), made for the workload's user and good for
``answers.link_ttl_seconds``. Only a single release recommendation still to be decided
gets them (not a digest, not a notice that it was released or resolved).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from urllib.parse import urlencode

from collector.notify.answer_settings import AnswerSecrets, AnswerSettings
from collector.notify.callbacks import LinkClaim, sign_link
from collector.notify.links import Links
from collector.notify.messages import AnswerButton, Event, Text
from collector.notify.settings import Channel

ACTIONS = ("keep", "release", "dismiss")
LABELS = {
    "en": {"keep": "Keep for {hours:g} h", "release": "Release now", "dismiss": "Dismiss"},
    "zh": {"keep": "保留 {hours:g} 小时", "release": "立即释放", "dismiss": "忽略"},
}
#: event kinds that still ask for a decision
ANSWERABLE = frozenset({"opened", "updated", "reminder", "warning", "dry_run", "notify_only"})


def answer_path(token: str) -> str:
    return f"/ui/answer?{urlencode({'t': token})}"


class Buttons:
    """``Notifier``'s ``buttons`` hook: the answers for one message on one channel."""

    def __init__(
        self,
        settings: AnswerSettings,
        secrets: AnswerSecrets,
        links: Links,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.secrets = secrets
        self.links = links
        self.clock = clock

    def __call__(self, text: Text, events: Sequence[Event], channel: Channel) -> Text:
        if len(events) != 1 or not answerable(events[0]):
            return text
        facts = events[0].facts
        labels = self.labels(channel.language)
        if self.secrets.interactive(channel.kind):
            answers = tuple(AnswerButton(a, labels[a], facts.rec_id) for a in ACTIONS)
            return dataclasses.replace(text, answers=answers)
        base = self.links.collector_url.rstrip("/")
        if not (self.secrets.link_secret and base and facts.user):
            return text
        expires = self.clock() + self.settings.link_ttl_seconds
        signed = tuple(
            (labels[a], base + answer_path(self.sign(a, facts.rec_id, facts.user, expires)))
            for a in ACTIONS
        )
        return dataclasses.replace(text, links=(*text.links, *signed))

    def labels(self, language: str) -> dict[str, str]:
        hours = self.settings.keep_seconds / 3600.0
        words = LABELS.get(language, LABELS["en"])
        return {a: words[a].format(hours=hours) for a in ACTIONS}

    def sign(self, action: str, rec_id: str, user: str, expires_at: float) -> str:
        return sign_link(self.secrets.link_secret, LinkClaim(action, rec_id, user, expires_at))


def answerable(event: Event) -> bool:
    f = event.facts
    return f.rec_kind == "release_idle" and bool(f.rec_id) and event.kind in ANSWERABLE
