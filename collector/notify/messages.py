"""What a message says, in English or Simplified Chinese: events in, a neutral ``Text`` out.

An ``Event`` is one thing worth telling (a recommendation opened, a warning before an
auto-release, an Alertmanager alert); it is stored in the outbox as JSON. ``render`` turns
one event, or several (a digest), into a ``Text`` that each service module formats in
its own markup. Times are shown in UTC; money in the price book's currency.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from collector.notify import phrases
from collector.notify.commands import WorkloadName
from collector.notify.links import Links, console_url, grafana_url
from collector.notify.settings import SEVERITY_RANK

__all__ = ["AnswerButton", "Event", "Facts", "Links", "Mention", "Section", "Text", "render"]


class Facts(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What, where, who, how much, what to do. Empty/None fields are left out of the message."""

    title: str = ""  # free text: the recommendation's or the alert's own summary
    rec_kind: str = ""
    #: the recommendation's id, for its link in the console
    rec_id: str = ""
    workload: str = ""  # a workload key: pod:NS/NAME, slurm:ID, ...
    namespace: str = ""
    user: str = ""
    team: str = ""
    #: the top of the workload's owner chain ("Deployment/ml/llm-serve"), collector/kube
    owned_by: str = ""
    nodes: list[str] = msgspec.field(default_factory=list)
    gpus: list[str] = msgspec.field(default_factory=list)
    #: the GPUs as people name them, "gpu-node-00 #6" (never their UUIDs)
    gpu_names: list[str] = msgspec.field(default_factory=list)
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
    #: the command that does what the message recommends (commands.py)
    command: str = ""
    #: the auto-release policy that applies: enforce | notify ("" none); with dry_run
    policy: str = ""
    dry_run: bool = False
    #: the earliest an auto-release can happen (the warnings give the exact deadline)
    release_not_before: float | None = None
    action: str = ""
    deadline: float | None = None
    opt_out: str = ""
    reason: str = ""
    detail: str = ""
    #: the command that undoes what was done (a cordoned or drained node)
    undo: str = ""


class Event(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # unique per message-worthy change; the outbox refuses a second copy
    source: str  # recommendations | actions | alertmanager
    kind: str  # opened updated reminder resolved | warning acted dry_run failed skipped | firing
    severity: str = "warning"
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    facts: Facts = msgspec.field(default_factory=Facts)


@dataclass(frozen=True)
class Mention:
    """Someone to @: the service's id for them (a phone number when ``by_mobile``)."""

    id: str
    name: str = ""  # shown where the service needs a name with the id (Teams)
    by_mobile: bool = False


@dataclass(frozen=True)
class Section:
    heading: str
    fields: tuple[tuple[str, str], ...]
    #: (label, command) shown as code: what does it
    command: tuple[str, str] | None = None
    links: tuple[tuple[str, str], ...] = ()
    #: the event's facts for scripts (webhook JSON): command, deadline, links, owner
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AnswerButton:
    """A button that answers a recommendation (collector/notify/buttons.py): ``action`` is
    keep | release | dismiss; ``url`` a signed link where the service cannot call back."""

    action: str
    label: str
    rec_id: str
    url: str = ""


@dataclass(frozen=True)
class Text:
    """A message before any service's markup. ``sections`` has one entry per event."""

    title: str
    severity: str
    sections: tuple[Section, ...]
    links: tuple[tuple[str, str], ...] = ()
    mentions: tuple[Mention, ...] = ()
    event_keys: tuple[str, ...] = ()
    language: str = "en"
    #: buttons that call the collector back (Slack, Feishu/Lark with answers configured)
    answers: tuple[AnswerButton, ...] = ()


def render(
    events: Sequence[Event], language: str, links: Links, mentions: Sequence[Mention] = ()
) -> Text:
    """One event: its headline is the title, its links the message's. Several: a digest
    titled with the count, each section with its own links."""
    words = phrases.for_language(language)
    sections = tuple(section(e, words, links) for e in events)
    if len(events) == 1:
        only = sections[0]
        title, shown = only.heading, only.links
        sections = (Section("", only.fields, only.command, (), only.data),)
    else:
        title = words.digest_title.format(n=len(events))
        shown = _pairs(
            (words.open_collector, console_url(links)), (words.open_grafana, grafana_url(links))
        )
    severity = max((e.severity for e in events), key=lambda s: SEVERITY_RANK.get(s, 0))
    return Text(
        title=title,
        severity=severity,
        sections=sections,
        links=shown,
        mentions=tuple(mentions),
        event_keys=tuple(e.key for e in events),
        language=language,
    )


def section(event: Event, words: phrases.Phrases, links: Links) -> Section:
    f = event.facts
    node = f.nodes[0] if len(f.nodes) == 1 else ""
    event_links = _pairs(
        (words.open_collector, console_url(links, f.rec_id, f.workload)),
        (words.open_grafana, grafana_url(links, f.workload, f.namespace, node)),
    )
    command = (words.label["command"], f.command) if f.command else None
    if f.rec_kind == "broken_gpus" and (f.command or f.undo):  # a node taken out of service
        command = (words.label["undo"], f.undo) if f.undo else (words.label["by_hand"], f.command)
    return Section(headline(event, words), fields(event, words), command, event_links,
                   structured(event, dict(event_links)))  # fmt: skip


def _pairs(*pairs: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((label, url) for label, url in pairs if url)


def workload_words(key: str, words: phrases.Phrases) -> str:
    """``pod:ml/nb-7`` -> "pod ml/nb-7", ``slurm:842992`` -> "Slurm job 842992"."""
    w = WorkloadName.of(key)
    template = words.workload_kinds.get(w.kind)
    return template.format(namespace=w.namespace, name=w.name) if template else key


def gpu_words(names: Sequence[str]) -> str:
    """["n0 #6", "n0 #7", "n1 #0"] -> "n0 #6, #7; n1 #0"."""
    by_node: dict[str, list[str]] = {}
    for name in names:
        node, _, index = name.rpartition(" #")
        by_node.setdefault(node, []).append(f"#{index}" if node else name)
    return "; ".join(f"{node} {', '.join(ix)}".strip() for node, ix in by_node.items())


def headline(event: Event, words: phrases.Phrases) -> str:
    f = event.facts
    subject = (f.workload and workload_words(f.workload, words)) or ", ".join(f.nodes) or f.title
    template = words.headlines.get(f"{event.kind}:{f.rec_kind}") or words.headlines.get(
        event.kind, "{title}"
    )
    return template.format(
        subject=subject,
        gpus=words.count_idle(len(f.gpus), f.gpu_models),
        title=f.title,
        action=f.action,
        deadline=format_time(f.deadline) if f.deadline is not None else "",
    )


def fields(event: Event, words: phrases.Phrases) -> tuple[tuple[str, str], ...]:
    f = event.facts
    out: list[tuple[str, str]] = []
    add = out.append
    if f.workload:
        owned_by = f" ({f.owned_by})" if f.owned_by else ""
        add((words.label["workload"], workload_words(f.workload, words) + owned_by))
    if f.user or f.team:
        add((words.label["owner"], words.owner(f.user, f.team)))
    if f.nodes and not f.gpu_names:
        add((words.label["node"], ", ".join(f.nodes)))
    if f.gpus:
        add((words.label["gpus"], _gpus(f, words)))
    if f.idle_seconds is not None:
        add((words.label["idle"], words.duration(f.idle_seconds)))
    if f.money_per_hour is not None:
        add((words.label["cost"], _cost(f, words)))
    if f.evidence_seconds is not None:
        level = words.confidence_levels[confidence_level(f.confidence or 0.0)]
        seen = words.duration(f.evidence_seconds)
        add((words.label["evidence"], words.evidence.format(seen=seen, level=level)))
    if f.energy_kwh_per_month is not None:
        kwh, kg = f.energy_kwh_per_month, f.carbon_kg_per_month or 0.0
        add((words.label["energy"], words.energy.format(kwh=kwh, kg=kg)))
    if f.rec_kind == "scale_down" and f.nodes and event.source == "recommendations":
        add((words.label["todo"], words.scale_down_words.format(node=", ".join(f.nodes))))
    _add_policy_fields(f, words, add)
    _add_action_fields(f, words, add)
    if f.detail:
        add((words.label["detail"], f.detail))
    return tuple(out)


def _gpus(f: Facts, words: phrases.Phrases) -> str:
    models = f.gpu_models or "GPU"
    if not f.gpu_names:
        return words.gpus.format(n=len(f.gpus), models=models)
    return words.gpus_on.format(names=gpu_words(f.gpu_names), n=len(f.gpus), models=models)


def structured(event: Event, links: Mapping[str, str]) -> dict[str, Any]:
    """The event for a script: what to run, by when, who owns it, where to look."""
    f = event.facts
    data: dict[str, Any] = {
        "key": event.key, "kind": event.kind, "recommendation": f.rec_kind,
        "recommendation_id": f.rec_id, "workload": f.workload, "namespace": f.namespace,
        "owner": {"user": f.user, "team": f.team}, "owned_by": f.owned_by,
        "gpus": list(f.gpu_names),
        "command": f.command, "policy": f.policy, "dry_run": f.dry_run,
        "release_not_before": f.release_not_before, "deadline": f.deadline,
        "opt_out": f.opt_out, "links": list(links.values()),
    }  # fmt: skip
    return {k: v for k, v in data.items() if v not in ("", None, [], {})}


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


def _add_policy_fields(
    f: Facts, words: phrases.Phrases, add: Callable[[tuple[str, str]], None]
) -> None:
    """Before any warning: the policy that applies, the earliest it can act, how to opt out."""
    if not f.policy or f.release_not_before is None:
        return
    name = f"{f.policy}_dry_run" if f.policy == "enforce" and f.dry_run else f.policy
    template = words.policies.get(name)
    if template:
        add((words.label["policy"], template.format(when=format_time(f.release_not_before))))
    if name == "enforce" and f.deadline is None:
        how = words.opt_out_cmd.format(cmd=f.opt_out) if f.opt_out else words.opt_out_admin
        add((words.label["opt_out"], how))


def _add_action_fields(
    f: Facts, words: phrases.Phrases, add: Callable[[tuple[str, str]], None]
) -> None:
    if f.action:
        add((words.label["action"], f.action))
    if f.deadline is not None:
        add((words.label["deadline"], format_time(f.deadline)))
    if f.opt_out and f.deadline is not None:
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
        if section.command:
            lines.append(f"{section.command[0]}: `{section.command[1]}`")
        if section.links:
            lines.append(" | ".join(link(label, url) for label, url in section.links))
        lines.append("")
    if text.links:
        lines.append(" | ".join(link(label, url) for label, url in text.links))
    return newline.join(lines).strip()
