"""Delivery: the outbox to the services, with digests, rate limits, retries and backoff.

``Notifier.observe`` turns recommendation changes into outbox rows; ``announce`` stores
one event (an auto-release warning, an Alertmanager alert); ``deliver`` sends what is due.
Per channel and pass: wait until the oldest event is ``digest_interval_seconds`` old;
send at most ``rate_per_minute`` minus the messages of the last 60 s (counted in the
ledger, so a restart does not reset it); when more events wait than messages are left,
several go in one digest. 429 and the services' "too fast" codes pause the channel for
Retry-After; 5xx and network errors back off exponentially; any other refusal marks the
channel broken (metric + one log line naming the channel, never its URL).

All network I/O passes one ``httpx.BaseTransport`` (tests give it a real local server),
used directly so that no request line with the URL's token reaches a log.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

import httpx

from collector.notify import dingtalk, discord, feishu, slack, teams, webhook, wecom
from collector.notify.changes import FleetIndex, changes
from collector.notify.claims import Claims, LocalClaims
from collector.notify.directory import Directory, unique
from collector.notify.messages import Event, Links, Mention, Text, render
from collector.notify.outbox import Outbox, Pending
from collector.notify.routing import route
from collector.notify.settings import Channel, NotificationSettings
from collector.notify.stats import NotifyStats
from collector.notify.vendor import Request, SendOutcome, Service, Verdict
from collector.records import Recommendation

log = logging.getLogger(__name__)
T = TypeVar("T")

SERVICES: dict[str, Service] = {
    "slack": slack.SERVICE, "teams": teams.SERVICE, "feishu": feishu.SERVICE,
    "lark": feishu.SERVICE, "dingtalk": dingtalk.SERVICE, "wecom": wecom.SERVICE,
    "discord": discord.SERVICE, "webhook": webhook.SERVICE,
}  # fmt: skip
RATE_WINDOW_SECONDS = 60.0


def plan(
    items: Sequence[T],
    budget: int,
    per_message: int,
    max_items: int,
    fits: Callable[[Sequence[T]], bool],
) -> list[list[T]]:
    """Split ``items`` (oldest first) into at most ``budget`` messages of up to
    ``per_message`` items, packing more per message (up to ``max_items``) when the budget
    is short; a message that does not ``fits`` sheds its last items to a later pass."""
    if budget <= 0 or not items:
        return []
    size = max(per_message, math.ceil(len(items) / budget))
    size = max(1, min(size, max_items))
    groups: list[list[T]] = []
    rest = list(items)
    while rest and len(groups) < budget:
        group = rest[:size]
        while len(group) > 1 and not fits(group):
            group = group[:-1]
        groups.append(group)
        rest = rest[len(group) :]
    return groups


class Notifier:
    def __init__(
        self,
        settings: NotificationSettings,
        channels: Sequence[Channel],
        outbox: Outbox,
        links: Links,
        transport: httpx.BaseTransport,
        clock: Callable[[], float] = time.time,
        buttons: Callable[[Text, Sequence[Event], Channel], Text] | None = None,
        claims: Claims | None = None,
    ) -> None:
        """``buttons`` adds answer buttons or signed links to a message (buttons.py);
        ``claims`` decides which rows this sender may send (claims.py; default: all)."""
        self.settings = settings
        self.buttons = buttons
        self.channels = list(channels)
        self.outbox = outbox
        self.claims = claims if claims is not None else LocalClaims(outbox)
        self.links = links
        self.transport = transport
        self.clock = clock
        self.directory = Directory(settings.users, settings.teams)
        self.stats = NotifyStats()
        self._paused_until: dict[str, float] = {}

    # -- what to tell ---------------------------------------------------------------------

    def observe(self, recs: Sequence[Recommendation], index: FleetIndex, now: float) -> int:
        """Store a message per channel route for every recommendation state change."""
        found = changes(recs, self.outbox.told(), self.settings, index, now)
        items = [(event, told, self._route(event) if event else []) for event, told in found]
        return self.outbox.record(items, now) if items else 0

    def announce(self, event: Event, now: float) -> int:
        return self.outbox.enqueue(event, self._route(event), now)

    def _route(self, event: Event) -> list[str]:
        names = [c.name for c in self.channels]
        return route(event, self.settings.routes, names, self.directory.team_channels)

    # -- sending --------------------------------------------------------------------------

    def deliver(self, now: float | None = None) -> int:
        """Send what is due on every channel; returns the messages sent."""
        at = self.clock() if now is None else now
        return sum(self._deliver_channel(channel, at) for channel in self.channels)

    def _deliver_channel(self, channel: Channel, now: float) -> int:
        if channel.name in self.stats.broken() or self._paused_until.get(channel.name, 0) > now:
            return 0
        due = self.outbox.due(channel.name, now)
        interval = channel.digest_interval_seconds
        if not due or now < min(p.created_at for p in due) + interval:
            return 0
        since = now - RATE_WINDOW_SECONDS
        budget = channel.rate_per_minute - self.outbox.messages_sent_since(channel.name, since)
        service = SERVICES[channel.kind]
        groups = plan(
            due,
            budget,
            self.settings.digest_max_items if interval > 0 else 1,
            self.settings.digest_max_items,
            lambda group: service.fits(self._text(channel, group), channel),
        )
        sent = 0
        for group in groups:
            if not self._send(channel, service, group, now):
                break
            sent += 1
        return sent

    def _text(self, channel: Channel, group: Sequence[Pending]) -> Text:
        """The group's message for ``channel``, mentioning the channel's own people and
        each event's owner in the service's syntax."""
        events = [p.event for p in group]
        fixed = [
            Mention(m, m, channel.kind == "dingtalk" and m.isdigit()) for m in channel.mentions
        ]
        owners = [
            m
            for e in events
            for m in self.directory.mentions(e.facts.user, e.facts.team, channel.kind)
        ]
        text = render(events, channel.language, self.links, unique([*fixed, *owners]))
        return self.buttons(text, events, channel) if self.buttons is not None else text

    def _send(
        self, channel: Channel, service: Service, group: Sequence[Pending], now: float
    ) -> bool:
        claimed = set(self.claims.claim([p.id for p in group], now))
        group = [p for p in group if p.id in claimed]
        if not group:  # another sender has them, or this one no longer leads
            return False
        request = service.build(self._text(channel, group), channel, now)
        outcome = self._post(service, request)
        self.stats.count(channel.name, channel.kind, outcome.verdict.value)
        ids = [p.id for p in group]
        if outcome.verdict is Verdict.OK:
            self.claims.sent(ids, uuid.uuid4().hex, now)
            return True
        self._failed(channel, group, outcome, now)
        return False

    def _failed(
        self, channel: Channel, group: Sequence[Pending], outcome: SendOutcome, now: float
    ) -> None:
        ids = [p.id for p in group]
        if outcome.verdict is Verdict.PERMANENT:
            self.stats.mark_broken(channel.name, channel.kind, outcome.detail)
            log.error(
                "notification channel %r (%s) refused a message permanently: %s; "
                "fix its configuration and restart",
                channel.name,
                channel.kind,
                outcome.detail,
            )
            return
        if outcome.verdict is Verdict.RATE_LIMITED:
            until = now + (outcome.retry_after_seconds or RATE_WINDOW_SECONDS)
            self._paused_until[channel.name] = until
            self.claims.defer(ids, until, count_attempt=False)
            log.warning(
                "notification channel %r rate-limited until +%.0f s", channel.name, until - now
            )
            return
        attempts = max(p.attempts for p in group)
        backoff = self.settings.backoff_initial_seconds * 2**attempts
        delay = max(outcome.retry_after_seconds or 0.0, backoff)
        until = now + min(delay, self.settings.backoff_max_seconds)
        self.claims.defer(ids, until, count_attempt=True)
        log.warning(
            "notification channel %r: %s; retrying in %.0f s",
            channel.name,
            outcome.detail,
            until - now,
        )

    def _post(self, service: Service, request: Request) -> SendOutcome:
        timeout = self.settings.timeout_seconds
        outgoing = httpx.Request(
            "POST",
            request.url,
            content=request.body,
            headers=request.headers,
            extensions={"timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout)},
        )
        try:
            response = self.transport.handle_request(outgoing)
            try:
                content = response.read()
            finally:
                response.close()
        except httpx.HTTPError as err:  # the message may hold the URL: log the type only
            return SendOutcome(Verdict.RETRY, None, type(err).__name__)
        return service.interpret(response.status_code, response.headers, content)
