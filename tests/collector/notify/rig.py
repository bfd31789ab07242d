"""Shared pieces for the notification tests: a notifier on a ledger file with a hand clock,
and recommendations like the ones the collector makes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from collector.ledger.store import Ledger
from collector.notify.changes import FleetIndex, ReleasePlan
from collector.notify.delivery import Notifier
from collector.notify.messages import Event, Facts, Links
from collector.notify.outbox import Outbox
from collector.notify.settings import ChannelSettings, NotificationSettings, resolve_channel
from collector.records import (
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)
from tests.collector.notify.fake_services import FakeService

T0 = 1_790_000_000.0
LINKS = Links("http://collector.example:8080", "http://grafana.example:3000")


class HandClock:
    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@contextmanager
def notifier_for(
    tmp_path: Path, channels: list[ChannelSettings], clock: HandClock, **settings: Any
) -> Iterator[Notifier]:
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    config = NotificationSettings(channels=channels, **settings)
    notifier = Notifier(
        config,
        [resolve_channel(c) for c in channels],
        Outbox(ledger),
        LINKS,
        httpx.HTTPTransport(),
        clock,
    )
    try:
        yield notifier
    finally:
        ledger.close()


@contextmanager
def fake(kind: str, clock: HandClock, secret: str = "") -> Iterator[FakeService]:
    service = FakeService(kind, secret=secret, now=clock)
    try:
        yield service
    finally:
        service.close()


def channel(service: FakeService, name: str = "ops", **kw: Any) -> ChannelSettings:
    return ChannelSettings(
        name=name,
        kind=service.kind,
        url=service.url,  # type: ignore[arg-type]
        secret=service.secret,
        **kw,
    )


def release_rec(
    n: int = 0,
    status: RecommendationStatus = RecommendationStatus.OPEN,
    money_per_hour: float = 8.4,
    gpus: int = 2,
    at: float = T0,
    namespace: str = "ml",
) -> Recommendation:
    key = f"pod:{namespace}/notebook-{n}"
    return Recommendation(
        id=f"release_idle:{key}",
        kind=RecommendationKind.RELEASE_IDLE,
        subject=key,
        title=f"Release {gpus} idle H100 GPU(s) held by {key}: {money_per_hour:.2f} USD/h",
        evidence={"idle_since": at - 7200.0, "nodes": ["gpu-node-00"]},
        savings=Savings(  # idle for 2 h when evaluated: the window behind the figure
            money_per_hour * 730,
            700.0 * gpus * 0.73,
            290.0 * gpus,
            "USD",
            money_per_hour,
            evidence_seconds=7200.0,
            money_per_month_low=money_per_hour * 2,
            confidence=7200.0 / (7 * 24 * 3600),
        ),
        status=status,
        opened_at=at,
        updated_at=at,
        gpu_uuids=tuple(f"GPU-{n}-{i}" for i in range(gpus)),
        node="gpu-node-00",
        workload_key=key,
        namespace=namespace,
        resolved_at=at if status is RecommendationStatus.RESOLVED else None,
    )


def index_for(
    *recs: Recommendation,
    team: str = "vision",
    user: str = "alice",
    plans: dict[str, ReleasePlan] | None = None,
) -> FleetIndex:
    """Each GPU ``GPU-<n>-<i>`` of the recommendations is ``gpu-node-00 #<i + 4>``."""
    refs = {
        r.workload_key: WorkloadRef(
            r.workload_key, "kubernetes_pod", r.workload_key, r.namespace, team, user
        )
        for r in recs
    }
    models = {u: "H100" for r in recs for u in r.gpu_uuids}
    names = {u: f"gpu-node-00 #{int(u.rsplit('-', 1)[1]) + 4}" for r in recs for u in r.gpu_uuids}
    return FleetIndex(refs, models, names, plans or {})


def simple_event(key: str, namespace: str = "ml", severity: str = "warning") -> Event:
    return Event(
        key=key,
        source="actions",
        kind="warning",
        severity=severity,
        labels={"namespace": namespace},
        facts=Facts(
            workload=f"pod:{namespace}/{key}",
            gpus=["GPU-a"],
            gpu_models="H100",
            idle_seconds=5400.0,
            money_per_hour=4.2,
            money_per_month=3066.0,
            currency="USD",
            action="delete pod",
            deadline=T0 + 3600,
        ),
    )
