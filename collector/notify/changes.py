"""Recommendation state changes worth a message, decided purely from what was last told.

For each recommendation and what the channels were last told about it (``Notified``):
opened (or re-opened after a resolution) -> ``opened``; a material change (GPUs or cost)
past the cooldown -> ``updated``; still standing past the re-notify interval ->
``reminder``; resolved -> ``resolved`` (when ``send_resolved``); dismissed -> silence.
Event keys are unique per change, so the outbox stores each at most once per channel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from collector.notify.commands import exempt_command, release_command
from collector.notify.messages import Event, Facts
from collector.notify.settings import NotificationSettings
from collector.records import (
    LIVE_STATUSES,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    WorkloadRef,
)

SEVERITY = {RecommendationKind.RELEASE_IDLE: "warning"}


@dataclass(frozen=True)
class Notified:
    """What the channels were last told about one recommendation."""

    subject: str  # the recommendation id
    status: str  # live | resolved | dismissed
    fingerprint: str
    notified_at: float


@dataclass(frozen=True)
class ReleasePlan:
    """The auto-release policy that applies to a workload, as collector/actions/ decides it
    (the CLI builds these from actions.policy; notify does not import actions)."""

    policy: str  # enforce | notify
    dry_run: bool
    #: the earliest deadline: the idle episode's start plus the policy's delay
    not_before: float
    #: the pod label that exempts a workload (actions.exempt_key)
    exempt_key: str = ""


@dataclass(frozen=True)
class FleetIndex:
    """Who holds what, from the fleet view: for team/user, GPU names and models in messages."""

    workloads: Mapping[str, WorkloadRef]
    models: Mapping[str, str]  # gpu uuid -> model
    #: gpu uuid -> "gpu-node-00 #6"
    gpu_names: Mapping[str, str] = field(default_factory=dict)
    #: workload key -> the auto-release plan for it, where a policy applies
    plans: Mapping[str, ReleasePlan] = field(default_factory=dict)


def gpu_name(view: GpuView) -> str:
    """A GPU as people name it: its node and index, "gpu-node-00 #6"."""
    return f"{view.node} #{view.index}"


def fingerprint(rec: Recommendation) -> str:
    return json.dumps({"gpus": len(rec.gpu_uuids), "money": rec.savings.money_per_hour})


def material(old: str, new: str, fraction: float) -> bool:
    a, b = json.loads(old), json.loads(new)
    if a["gpus"] != b["gpus"]:
        return True
    return bool(abs(b["money"] - a["money"]) > fraction * max(abs(a["money"]), 1e-9))


def changes(
    recs: Sequence[Recommendation],
    told: Mapping[str, Notified],
    settings: NotificationSettings,
    index: FleetIndex,
    now: float,
) -> list[tuple[Event | None, Notified]]:
    """(event to send or None, what is now told) for every recommendation that changed."""
    out = []
    for rec in recs:
        if rec.kind.value not in settings.kinds:
            continue
        change = _change(rec, told.get(rec.id), settings, index, now)
        if change is not None:
            out.append(change)
    return out


def _change(
    rec: Recommendation,
    last: Notified | None,
    settings: NotificationSettings,
    index: FleetIndex,
    now: float,
) -> tuple[Event | None, Notified] | None:
    fp = fingerprint(rec)
    was_live = last is not None and last.status == "live"
    if rec.status in LIVE_STATUSES:
        if last is None or not was_live:
            return _event(rec, "opened", f"{rec.opened_at}", index, now), _told(rec, "live", now)
        since = now - last.notified_at
        if since >= settings.cooldown_seconds and material(
            last.fingerprint, fp, settings.material_change_fraction
        ):
            return _event(rec, "updated", f"{now}", index, now), _told(rec, "live", now)
        if since >= settings.renotify_interval_seconds:
            return _event(rec, "reminder", f"{now}", index, now), _told(rec, "live", now)
        return None
    if not was_live:
        return None
    if rec.status is RecommendationStatus.RESOLVED:
        event = _event(rec, "resolved", f"{rec.resolved_at}", index, now)
        return (event if settings.send_resolved else None), _told(rec, "resolved", now)
    return None, _told(rec, "dismissed", now)


def _told(rec: Recommendation, status: str, now: float) -> Notified:
    return Notified(rec.id, status, fingerprint(rec), now)


def _event(rec: Recommendation, kind: str, stamp: str, index: FleetIndex, now: float) -> Event:
    ref = index.workloads.get(rec.workload_key)
    labels = {
        "namespace": rec.namespace,
        "team": ref.team if ref else "",
        "user": ref.user if ref else "",
        "owner": ref.owner if ref else "",
        "node": rec.node,
        "kind": rec.kind.value,
        "workload": rec.workload_key,
    }
    severity = "info" if kind == "resolved" else SEVERITY.get(rec.kind, "info")
    return Event(
        key=f"{rec.id}|{kind}|{stamp}",
        source="recommendations",
        kind=kind,
        severity=severity,
        labels={k: v for k, v in labels.items() if v},
        facts=facts_of(rec, index, now),
    )


def facts_of(rec: Recommendation, index: FleetIndex, now: float) -> Facts:
    ev = rec.evidence
    idle_since = ev.get("idle_since")
    nodes = ev.get("nodes")
    ref = index.workloads.get(rec.workload_key)
    models = sorted({index.models[u] for u in rec.gpu_uuids if u in index.models})
    s = rec.savings
    release = rec.kind is RecommendationKind.RELEASE_IDLE
    plan = index.plans.get(rec.workload_key) if release else None
    return Facts(
        title=rec.title,
        rec_kind=rec.kind.value,
        rec_id=rec.id,
        workload=rec.workload_key,
        namespace=rec.namespace,
        user=ref.user if ref else "",
        team=ref.team if ref else "",
        owned_by=ref.owner if ref else "",
        nodes=[str(n) for n in nodes] if isinstance(nodes, list) else [rec.node] * bool(rec.node),
        gpus=list(rec.gpu_uuids),
        gpu_names=_names(rec.gpu_uuids, index),
        gpu_models=", ".join(models),
        command=release_command(rec.workload_key) if release else "",
        policy=plan.policy if plan else "",
        dry_run=plan.dry_run if plan else False,
        release_not_before=plan.not_before if plan else None,
        opt_out=exempt_command(rec.workload_key, plan.exempt_key) if plan else "",
        idle_seconds=now - idle_since if isinstance(idle_since, int | float) else None,
        money_per_hour=s.money_per_hour,
        money_per_month=s.money_per_month,
        # rows stored before the window was recorded say 0: no window stated
        evidence_seconds=s.evidence_seconds if s.evidence_seconds > 0 else None,
        money_per_month_low=s.money_per_month_low if s.evidence_seconds > 0 else None,
        confidence=s.confidence if s.evidence_seconds > 0 else None,
        currency=s.currency,
        energy_kwh_per_month=s.energy_kwh_per_month,
        carbon_kg_per_month=s.carbon_kg_per_month,
    )


def _names(uuids: Sequence[str], index: FleetIndex) -> list[str]:
    """The GPUs' names when all are known; else none (a count is shown instead)."""
    names = [index.gpu_names.get(u, "") for u in uuids]
    return names if all(names) else []
