"""The ``notifications`` settings section, and channels with their secrets resolved.

A channel's URL is a secret (most services put the token in it): give it inline only
through the environment (``GPUFLEET_NOTIFICATIONS__CHANNELS`` as JSON) or, better, in a
file (``url_file``, ``secret_file``). Nothing here logs a URL or a secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpufleet.settings import ConfigError, read_secret

Kind = Literal["slack", "teams", "feishu", "lark", "dingtalk", "wecom", "discord", "webhook"]
Language = Literal["en", "zh"]
Severity = Literal["info", "warning", "critical"]
Source = Literal["recommendations", "actions", "alertmanager"]

SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

#: messages per minute each service allows one webhook (deploy-notify.md §1.1)
RATE_PER_MINUTE: dict[str, int] = {
    "slack": 60, "teams": 60, "feishu": 100, "lark": 100, "dingtalk": 20, "wecom": 20,
    "discord": 30, "webhook": 600,
}  # fmt: skip
#: services whose own guidance is to aggregate alerts: a digest per minute by default
DIGEST_BY_DEFAULT = frozenset({"dingtalk", "wecom"})


@dataclass(frozen=True)
class ChannelSettings:
    name: str
    kind: Kind
    url: str = field(default="", repr=False)
    url_file: Path | None = None
    #: Feishu/Lark and DingTalk signing secret; Standard Webhooks ``whsec_...`` key
    secret: str = field(default="", repr=False)
    secret_file: Path | None = None
    language: Language = "en"
    #: who to @: DingTalk mobiles/user ids, WeCom user ids, Feishu open ids, Slack ids
    mentions: list[str] = field(default_factory=list)
    #: collect events this long and send them as one digest; None = the service default
    digest_interval_seconds: float | None = None
    rate_per_minute: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("notifications.channels: a channel needs a name")
        if self.rate_per_minute is not None and self.rate_per_minute < 1:
            raise ConfigError(f"notifications.channels.{self.name}.rate_per_minute: must be >= 1")


@dataclass(frozen=True)
class ContactSettings:
    """A person or a team in the owner directory: their id on each chat service.

    Empty: not mentioned on that service (never a guess). Slack: a member id (``U...``;
    a team may give a user group ``S...``); Teams: the Entra object id or UPN; Feishu and
    Lark: the ``open_id`` (``ou_...``); DingTalk: the userId or the mobile; WeCom: the
    userid (markdown messages mention by userid only); Discord: the user id.
    """

    #: shown where the service needs a name with the id (Teams)
    name: str = ""
    slack: str = ""
    teams: str = ""
    feishu: str = ""
    dingtalk: str = ""
    dingtalk_mobile: str = ""
    wecom: str = ""
    discord: str = ""
    #: where the efficiency report is emailed (collector/notify/mail.py)
    email: str = ""
    #: a user's team (a team name in ``teams``): its users may keep or dismiss the team's
    #: workloads from chat (collector/actions/answers.py)
    team: str = ""
    #: a team's own channels (names in ``channels``), for routes with ``to_owner_team``
    channels: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RouteSettings:
    """Send matching events to ``channels``; an empty list of conditions matches all."""

    channels: list[str] = field(default_factory=list)
    #: also the owning team's own channels (``notifications.teams.<team>.channels``)
    to_owner_team: bool = False
    namespaces: list[str] = field(default_factory=list)
    teams: list[str] = field(default_factory=list)
    #: every label must match (alert labels; for recommendations: namespace, team,
    #: user, owner ("Deployment/ml/llm-serve"), node, kind)
    labels: dict[str, str] = field(default_factory=dict)
    min_severity: Severity = "info"
    sources: list[Source] = field(
        default_factory=lambda: ["recommendations", "actions", "alertmanager"]
    )


@dataclass(frozen=True)
class NotificationSettings:
    channels: list[ChannelSettings] = field(default_factory=list)
    #: no routes: every channel gets every event
    routes: list[RouteSettings] = field(default_factory=list)
    #: the owner directory: a workload's user, else its team, is mentioned by these ids
    users: dict[str, ContactSettings] = field(default_factory=dict)
    teams: dict[str, ContactSettings] = field(default_factory=dict)
    #: recommendation kinds that are announced
    kinds: list[str] = field(default_factory=lambda: ["release_idle", "scale_down"])
    #: a standing recommendation is announced again after this long
    renotify_interval_seconds: float = 24 * 3600.0
    #: at most one update about one recommendation per this long
    cooldown_seconds: float = 3600.0
    #: an update is material when GPUs change or cost moves by this fraction
    material_change_fraction: float = 0.25
    send_resolved: bool = True
    #: events per digest message (further limited by the service's size limit)
    digest_max_items: int = 20
    timeout_seconds: float = 10.0
    backoff_initial_seconds: float = 5.0
    backoff_max_seconds: float = 600.0

    def __post_init__(self) -> None:
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise ConfigError("notifications.channels: channel names must be unique")
        for i, route in enumerate(self.routes):
            for name in route.channels:
                if name not in names:
                    raise ConfigError(
                        f"notifications.routes[{i}].channels: unknown channel {name!r}"
                    )
            if not route.channels and not route.to_owner_team:
                raise ConfigError(
                    f"notifications.routes[{i}]: give channels, or to_owner_team: true"
                )
        for section, contacts in (("users", self.users), ("teams", self.teams)):
            for who, contact in contacts.items():
                for name in contact.channels:
                    if name not in names:
                        raise ConfigError(
                            f"notifications.{section}.{who}.channels: unknown channel {name!r}"
                        )
        if self.digest_max_items < 1:
            raise ConfigError("notifications.digest_max_items: must be >= 1")


@dataclass(frozen=True)
class Channel:
    """A channel ready to use: secrets read, defaults applied. ``repr`` hides secrets."""

    name: str
    kind: Kind
    url: str = field(repr=False)
    secret: str = field(default="", repr=False)
    language: Language = "en"
    mentions: tuple[str, ...] = ()
    digest_interval_seconds: float = 0.0
    rate_per_minute: int = 60


def resolve_channel(settings: ChannelSettings) -> Channel:
    where = f"notifications.channels.{settings.name}"
    url = read_secret(settings.url, settings.url_file, f"{where}.url")
    if not url:
        raise ConfigError(f"{where}.url: set url_file (or url through the environment)")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}.url: must be an http(s) URL")
    secret = read_secret(settings.secret, settings.secret_file, f"{where}.secret") or ""
    digest = settings.digest_interval_seconds
    if digest is None:
        digest = 60.0 if settings.kind in DIGEST_BY_DEFAULT else 0.0
    return Channel(
        name=settings.name,
        kind=settings.kind,
        url=url,
        secret=secret,
        language=settings.language,
        mentions=tuple(settings.mentions),
        digest_interval_seconds=digest,
        rate_per_minute=settings.rate_per_minute or RATE_PER_MINUTE[settings.kind],
    )
