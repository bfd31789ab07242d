"""Recommendation life cycle: open, update, resolve with hysteresis, dismiss, re-open."""

from __future__ import annotations

import dataclasses

from collector.analysis.carbon import CarbonContext
from collector.analysis.cost import PriceBook
from collector.config import AnalysisSettings
from collector.recommend.lifecycle import RecommendPolicy, evaluate, reconcile
from collector.records import (
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)

OPEN, NOTIFIED = RecommendationStatus.OPEN, RecommendationStatus.NOTIFIED
RESOLVED, DISMISSED = RecommendationStatus.RESOLVED, RecommendationStatus.DISMISSED
RESOLVE_AFTER = 300.0


def desired(now: float, money: float = 1.0, subject: str = "pod:ml/a") -> Recommendation:
    return Recommendation(
        id=f"release_idle:{subject}", kind=RecommendationKind.RELEASE_IDLE, subject=subject,
        title="t", evidence={"idle_seconds": money}, savings=Savings(money, 0, 0, "USD"),
        status=OPEN, opened_at=now, updated_at=now, workload_key=subject,
    )  # fmt: skip


class Store:
    """What the ledger would hold: the latest version of each recommendation."""

    def __init__(self) -> None:
        self.recs: dict[str, Recommendation] = {}

    def step(self, wanted: list[Recommendation], now: float) -> list[Recommendation]:
        changed = reconcile(list(self.recs.values()), wanted, now, RESOLVE_AFTER)
        self.recs.update({r.id: r for r in changed})
        return changed


def test_new_recommendation_opens() -> None:
    [rec] = reconcile([], [desired(100)], 100, RESOLVE_AFTER)
    assert (rec.status, rec.opened_at, rec.updated_at, rec.resolved_at) == (OPEN, 100, 100, None)


def test_still_desired_updates_figures_and_keeps_status() -> None:
    old = dataclasses.replace(desired(100), status=NOTIFIED)
    [rec] = reconcile([old], [desired(160, money=5.0)], 160, RESOLVE_AFTER)
    assert (rec.status, rec.opened_at, rec.updated_at) == (NOTIFIED, 100, 160)
    assert rec.savings.money_per_month == 5.0


def test_resolves_only_after_absent_for_resolve_after() -> None:
    old = desired(100)
    assert reconcile([old], [], 100 + RESOLVE_AFTER - 1, RESOLVE_AFTER) == []
    [rec] = reconcile([old], [], 100 + RESOLVE_AFTER, RESOLVE_AFTER)
    assert (rec.status, rec.resolved_at, rec.opened_at) == (RESOLVED, 100 + RESOLVE_AFTER, 100)


def test_dismissed_stays_dismissed_then_resolves_then_reopens() -> None:
    store = Store()
    store.step([desired(0)], 0)
    store.recs["release_idle:pod:ml/a"] = dataclasses.replace(
        store.recs["release_idle:pod:ml/a"], status=DISMISSED)  # fmt: skip
    [rec] = store.step([desired(60)], 60)
    assert rec.status is DISMISSED
    assert store.step([], 300) == []
    [rec] = store.step([], 60 + RESOLVE_AFTER)
    assert rec.status is RESOLVED
    assert store.step([], 2000) == []  # resolved and not desired: nothing changes
    [rec] = store.step([desired(3000)], 3000)
    assert (rec.status, rec.opened_at, rec.resolved_at) == (OPEN, 3000, None)


def test_flapping_desire_never_flaps_the_output() -> None:
    """Desired every other evaluation (60 s apart) for two hours: one episode, never resolved."""
    store = Store()
    statuses = []
    for i in range(120):
        now = i * 60.0
        for rec in store.step([desired(now)] if i % 2 == 0 else [], now):
            statuses.append(rec.status)
    assert set(statuses) == {OPEN}
    assert store.recs["release_idle:pod:ml/a"].opened_at == 0


def test_independent_subjects_do_not_interfere() -> None:
    store = Store()
    store.step([desired(0, subject="a"), desired(0, subject="b")], 0)
    changed = store.step([desired(400, subject="b")], 400)
    assert {(r.subject, r.status) for r in changed} == {("a", RESOLVED), ("b", OPEN)}


NOTEBOOK = WorkloadRef("pod:ml/nb", "kubernetes_pod", "nb", "ml")


def view(now: float, idle_since: float | None) -> GpuView:
    state = GpuState.ACTIVE if idle_since is None else GpuState.ALLOCATED_IDLE
    return GpuView(uuid="GPU-0", node="n1", index=0, model="H100", name="NVIDIA H100",
                   state=state, last_seen=now, workloads=(NOTEBOOK,), idle_since=idle_since,
                   power_watts=70.0)  # fmt: skip


def test_stuck_notebook_through_evaluate_and_reconcile() -> None:
    """Idle from t=0; evaluated every 60 s: opens at the first evaluation at or past the
    window, stays open while idle, resolves RESOLVE_AFTER after the GPU turns busy."""
    settings = AnalysisSettings(idle_window_seconds=1800.0)
    prices, carbon, policy = (
        PriceBook.example(),
        CarbonContext(1.2, 400.0),
        RecommendPolicy.default(),
    )
    store = Store()
    events = []
    for i in range(0, 61):
        now = i * 60.0 + 30.0
        idle_since = 0.0 if now < 3000 else None  # busy again at t=3000
        wanted = evaluate([view(now, idle_since)], [], [], prices, carbon, settings, now, policy)
        events += [(now, r.status) for r in store.step(wanted, now) if r.status is not OPEN
                   or r.opened_at == now]  # fmt: skip
    assert events == [(1830.0, OPEN), (3030.0 + 240.0, RESOLVED)]
