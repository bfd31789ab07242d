"""Recommendations: what the fleet should change now, and their life cycle (DESIGN.md §4).

``evaluate`` is pure: it returns the *desired* set for the fleet view at ``now`` (status
OPEN, ids stable per kind and subject). ``reconcile`` merges that set into the stored
recommendations with hysteresis, so a subject that flickers around a threshold keeps one
recommendation instead of opening and resolving it over and over.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from collector.analysis.carbon import CarbonContext
from collector.analysis.cost import PriceBook
from collector.analysis.work_window import WorkloadWindow
from collector.config import AnalysisSettings
from collector.recommend import rules as rules
from collector.recommend.bottleneck import bottlenecks
from collector.recommend.broken_gpus import broken_gpus
from collector.recommend.consolidate import consolidate
from collector.recommend.pricing import pricing_plan
from collector.recommend.rightsize import right_size
from collector.recommend.rules import RecommendPolicy
from collector.records import (
    LIVE_STATUSES,
    GpuView,
    ModelHour,
    ModelUsage,
    Recommendation,
    RecommendationStatus,
    WorkloadProfile,
)

__all__ = ["RecommendPolicy", "evaluate", "reconcile"]


def evaluate(
    gpus: Sequence[GpuView],
    profiles: Sequence[WorkloadProfile],
    models: Sequence[ModelUsage],
    prices: PriceBook,
    carbon: CarbonContext,
    settings: AnalysisSettings,
    now: float,
    policy: RecommendPolicy | None = None,
    *,
    hours: Sequence[ModelHour] = (),
    standing: Sequence[Recommendation] = (),
    windows: Sequence[WorkloadWindow] = (),
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Recommendation]:
    """The recommendations the fleet warrants at ``now``, sorted by id.

    ``policy`` carries the GPU catalogue and the knobs AnalysisSettings lacks; build it
    once (``RecommendPolicy.default()`` reads the shipped catalogue) and pass it in.
    ``hours``: the pricing look-back's allocation curves (``Ledger.model_hours``);
    ``standing``: the stored recommendations, which anchor the pricing hysteresis;
    ``windows``: each workload's recent GPUs and host, for the bottleneck verdicts;
    ``node_labels``: each node's labels (``expected_gpus`` sets its GPU count).
    """
    ctx = rules.RuleContext(prices, carbon, settings, policy or RecommendPolicy.default(), now)
    desired = [
        *rules.release_idle(gpus, ctx),
        *rules.scale_down(gpus, ctx),
        *consolidate(gpus, ctx),
        *right_size(profiles, ctx),
        *pricing_plan(models, hours, ctx, {rec.id: rec for rec in standing}),
        *bottlenecks(windows, ctx),
        *broken_gpus(gpus, windows, ctx, node_labels or {}),
    ]
    return sorted(desired, key=lambda r: r.id)


def reconcile(
    existing: Sequence[Recommendation],
    desired: Sequence[Recommendation],
    now: float,
    resolve_after_seconds: float,
) -> list[Recommendation]:
    """The recommendations whose state or figures change at ``now``.

    - desired, not stored: OPEN, opened_at = updated_at = now;
    - stored open/notified/acted or dismissed, still desired: new figures, same status
      and opened_at, updated_at = now (``updated_at`` is the last time it was desired);
    - stored and not desired: RESOLVED once it has not been desired for
      ``resolve_after_seconds`` (until then, unchanged and not returned): the hysteresis;
    - a dismissed one stays dismissed while desired, and resolves like the others;
    - stored RESOLVED and desired again: re-opens as a new episode (OPEN, new opened_at).
    """
    wanted = {rec.id: rec for rec in desired}
    changed = []
    for old in existing:
        new = wanted.pop(old.id, None)
        updated = (
            _update(old, new, now) if new is not None else _expire(old, now, resolve_after_seconds)
        )
        if updated is not None:
            changed.append(updated)
    changed += [_open(rec, now) for rec in wanted.values()]
    return changed


def _open(rec: Recommendation, now: float) -> Recommendation:
    return dataclasses.replace(
        rec, status=RecommendationStatus.OPEN, opened_at=now, updated_at=now, resolved_at=None
    )


def _update(old: Recommendation, new: Recommendation, now: float) -> Recommendation:
    if old.status is RecommendationStatus.RESOLVED:
        return _open(new, now)
    return dataclasses.replace(
        new, status=old.status, opened_at=old.opened_at, updated_at=now, resolved_at=None
    )


def _expire(old: Recommendation, now: float, resolve_after: float) -> Recommendation | None:
    standing = old.status in LIVE_STATUSES or old.status is RecommendationStatus.DISMISSED
    if standing and now - old.updated_at >= resolve_after:
        return dataclasses.replace(old, status=RecommendationStatus.RESOLVED, resolved_at=now)
    return None
