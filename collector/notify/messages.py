"""What a message says, in English or Simplified Chinese: events in, a neutral ``Text`` out.

An ``Event`` is one thing worth telling (a recommendation opened, a warning before an
auto-release, an Alertmanager alert); it is stored in the outbox as JSON. ``render`` turns
one event, or several (a digest), into a ``Text`` that each service module formats in
its own markup. Times are shown in UTC; money in the price book's currency.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from collector.notify import phrases
from collector.notify.settings import SEVERITY_RANK


class Facts(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What, where, who, how much. Empty/None fields are left out of the message."""

    title: str = ""  # free text: the recommendation's or the alert's own summary
    rec_kind: str = ""
    workload: str = ""
    namespace: str = ""
    user: str = ""
    nodes: list[str] = msgspec.field(default_factory=list)
    gpus: list[str] = msgspec.field(default_factory=list)
    gpu_models: str = ""
    idle_seconds: float | None = None
    money_per_hour: float | None = None
    money_per_month: float | None = None
    #: the saving's observation window and what it supports (None: not stated)
    evidence_seconds: float | None = None
    money_per_month_low: float | None = None
    confidence: float | None = None
    currency: str = ""
    energy_kwh_per_month: float | None = None
    carbon_kg_per_month: float | None = None
    action: str = ""
    deadline: float | None = None
    opt_out: str = ""
    reason: str = ""
    detail: str = ""


class Event(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # unique per message-worthy change; the outbox refuses a second copy
    source: str  # recommendations | actions | alertmanager
    kind: str  # opened updated reminder resolved | warning acted dry_run failed skipped | firing
    severity: str = "warning"
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    facts: Facts = msgspec.field(default_factory=Facts)


@dataclass(frozen=True)
class Section:
    heading: str
    fields: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Text:
    """A message before any service's markup. ``sections`` has one entry per event."""

    title: str
    severity: str
    sections: tuple[Section, ...]
    links: tuple[tuple[str, str], ...] = ()
    mentions: tuple[str, ...] = ()
    event_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Links:
    collector_url: str = ""
    grafana_url: str = ""


def render(
    events: Sequence[Event], language: str, links: Links, mentions: Sequence[str] = ()
) -> Text:
    """One event: its headline is the title. Several: a digest titled with the count."""
    words = phrases.for_language(language)
    sections = tuple(Section(headline(e, words), fields(e, words)) for e in events)
    if len(events) == 1:
        title, sections = sections[0].heading, (Section("", sections[0].fields),)
    else:
        title = words.digest_title.format(n=len(events))
    severity = max((e.severity for e in events), key=lambda s: SEVERITY_RANK.get(s, 0))
    link_list = [
        (words.open_collector, links.collector_url),
        (words.open_grafana, links.grafana_url),
    ]
    return Text(
        title=title,
        severity=severity,
        sections=sections,
        links=tuple((label, url) for label, url in link_list if url),
        mentions=tuple(mentions),
        event_keys=tuple(e.key for e in events),
    )


def headline(event: Event, words: phrases.Phrases) -> str:
    f = event.facts
    subject = f.workload or ", ".join(f.nodes) or f.title
    template = words.headlines.get(f"{event.kind}:{f.rec_kind}") or words.headlines.get(
        event.kind, "{title}"
    )
    return template.format(
        subject=subject,
        n=len(f.gpus) or "",
        title=f.title,
        action=f.action,
        deadline=format_time(f.deadline) if f.deadline is not None else "",
    )


def fields(event: Event, words: phrases.Phrases) -> tuple[tuple[str, str], ...]:
    f = event.facts
    out: list[tuple[str, str]] = []
    add = out.append
    if f.workload:
        add((words.label["workload"], f.workload))
    if f.user:
        add((words.label["user"], f.user))
    if f.nodes:
        add((words.label["node"], ", ".join(f.nodes)))
    if f.gpus:
        add((words.label["gpus"], words.gpus.format(n=len(f.gpus), models=f.gpu_models or "GPU")))
    if f.idle_seconds is not None:
        add((words.label["idle"], words.duration(f.idle_seconds)))
    if f.money_per_hour is not None:
        add((words.label["cost"], _cost(f, words)))
    if f.evidence_seconds is not None:
        level = words.confidence_levels[confidence_level(f.confidence or 0.0)]
        seen = words.duration(f.evidence_seconds)
        add((words.label["evidence"], words.evidence.format(seen=seen, level=level)))
    if f.energy_kwh_per_month is not None:
        add(
            (
                words.label["energy"],
                words.energy.format(kwh=f.energy_kwh_per_month, kg=f.carbon_kg_per_month or 0.0),
            )
        )
    _add_action_fields(f, words, add)
    if f.detail:
        add((words.label["detail"], f.detail))
    return tuple(out)


def _cost(f: Facts, words: phrases.Phrases) -> str:
    month = f.money_per_month or 0.0
    if f.evidence_seconds is None or f.money_per_month_low is None:
        return words.cost.format(hour=f.money_per_hour, month=month, cur=f.currency)
    return words.cost_range.format(
        hour=f.money_per_hour, low=f.money_per_month_low, month=month, cur=f.currency
    )


#: confidence below this is "low": under a day of a week's evidence
LOW_CONFIDENCE = 1.0 / 7.0


def confidence_level(confidence: float) -> int:
    """0 low (under a day observed), 1 medium (under a week), 2 high (a week or more)."""
    if confidence >= 1.0:
        return 2
    return 1 if confidence >= LOW_CONFIDENCE else 0


def _add_action_fields(
    f: Facts, words: phrases.Phrases, add: Callable[[tuple[str, str]], None]
) -> None:
    if f.action:
        add((words.label["action"], f.action))
    if f.deadline is not None:
        add((words.label["deadline"], format_time(f.deadline)))
    if f.opt_out:
        add((words.label["opt_out"], words.opt_out_cmd.format(cmd=f.opt_out)))
    elif f.deadline is not None:
        add((words.label["opt_out"], words.opt_out_admin))
    if f.reason:
        add((words.label["reason"], words.reasons.get(f.reason, f.reason)))


def format_time(unix_seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(unix_seconds))


def as_markdown(
    text: Text,
    *,
    bold: str = "**",
    newline: str = "\n",
    link: Callable[[str, str], str] = lambda label, url: f"[{label}]({url})",
    with_title: bool = True,
) -> str:
    """Markdown most chat services accept: bold labels, one field per line, links last."""
    lines = [f"{bold}{text.title}{bold}", ""] if with_title else []
    for section in text.sections:
        if section.heading:
            lines.append(f"{bold}{section.heading}{bold}")
        lines += [f"{label}: {value}" for label, value in section.fields]
        lines.append("")
    if text.links:
        lines.append(" | ".join(link(label, url) for label, url in text.links))
    return newline.join(lines).strip()
