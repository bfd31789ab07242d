"""The auto-release engine on hand-made fleet views: warnings at the configured points, the
action at the deadline, and never on stale/unknown data, active GPUs or exempt workloads."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest

from collector.actions.engine import ActionEngine, Executors
from collector.actions.kubernetes import KubernetesExecutor, api_client
from collector.actions.log import ActionLog
from collector.actions.settings import ActionSettings, KubernetesSettings, PolicySettings
from collector.ledger.store import Ledger
from collector.notify.messages import Event
from collector.records import (
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)
from tests.collector.actions.fake_kubernetes import TOKEN, FakeKubernetes, FakePod

T0 = 1_790_000_000.0
HOUR = 3600.0
REF = WorkloadRef("pod:ml/nb", "kubernetes_pod", "nb", "ml", "vision", "alice")


def view(
    now: float,
    idle_since: float | None = T0,
    state: GpuState = GpuState.ALLOCATED_IDLE,
    age: float = 10.0,
    ref: WorkloadRef = REF,
    index: int = 0,
) -> GpuView:
    return GpuView(
        uuid=f"GPU-{ref.name}-{index}",
        node="n1",
        index=index,
        model="H100",
        name="NVIDIA H100",
        state=state,
        last_seen=now - age,
        workloads=(ref,),
        idle_since=idle_since if state is GpuState.ALLOCATED_IDLE else None,
    )


def rec(ref: WorkloadRef = REF) -> Recommendation:
    return Recommendation(
        id=f"release_idle:{ref.key}",
        kind=RecommendationKind.RELEASE_IDLE,
        subject=ref.key,
        title="Release",
        evidence={"idle_since": T0},
        status=RecommendationStatus.OPEN,
        savings=Savings(3000.0, 500.0, 200.0, "USD", 4.1),
        opened_at=T0 + 1800,
        updated_at=T0 + 1800,
        gpu_uuids=(f"GPU-{ref.name}-0",),
        workload_key=ref.key,
        namespace=ref.namespace,
    )


@dataclasses.dataclass
class Rig:
    engine: ActionEngine
    cluster: FakeKubernetes
    announced: list[Event]
    log: ActionLog

    def run(
        self, now: float, views: list[GpuView], recs: list[Recommendation] | None = None
    ) -> list[str]:
        entries = self.engine.run(views, [rec()] if recs is None else recs, now)
        return [f"{e.stage}={e.decision}" for e in entries]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with make_rig(
        tmp_path,
        PolicySettings(
            mode="enforce",
            dry_run=False,
            release_after_seconds=4 * HOUR,
            warn_at=[0.5, 0.9],
            min_runtime_seconds=HOUR,
        ),
    ) as made:
        yield made


@contextmanager
def make_rig(tmp_path: Path, policy: PolicySettings, **settings: object) -> Iterator[Rig]:
    cluster = FakeKubernetes([FakePod("ml", "nb"), FakePod("ml", "other")])
    token = tmp_path / "token"
    token.write_text(TOKEN)
    k8s = KubernetesSettings(enabled=True, host=cluster.host, token_file=token)
    config = ActionSettings(default=policy, kubernetes=k8s, **settings)  # type: ignore[arg-type]
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    announced: list[Event] = []
    executor = KubernetesExecutor(api_client(k8s), k8s, config.exempt_key)
    engine = ActionEngine(
        config,
        ActionLog(ledger),
        Executors(kubernetes=executor),
        lambda event, now: announced.append(event) or 1,
    )
    try:
        yield Rig(engine, cluster, announced, ActionLog(ledger))
    finally:
        ledger.close()
        cluster.close()


def test_warnings_at_half_and_ninety_percent_then_the_action(rig: Rig) -> None:
    timeline = {}
    for minutes in range(0, 5 * 60, 5):  # every 5 minutes for 5 hours of one idle episode
        now = T0 + minutes * 60
        for entry in rig.run(now, [view(now)]):
            timeline[minutes] = entry
    # passes every 5 min: 50 % of 4 h = 120 min, 90 % = 216 min -> the 220 min pass
    assert timeline == {120: "warn:0.5=warned", 220: "warn:0.9=warned", 240: "act=acted"}
    assert [(c.method, c.path) for c in rig.cluster.mutations()] == [
        ("DELETE", "/api/v1/namespaces/ml/pods/nb")
    ]
    kinds = [e.kind for e in rig.announced]
    assert kinds == ["warning", "warning", "acted"]
    warning = rig.announced[0].facts
    assert warning.deadline == T0 + 4 * HOUR
    assert warning.opt_out == "kubectl label pod -n ml nb gpufleet.io/exempt=true"
    assert warning.action == "delete pod ml/nb"


def test_stale_or_unknown_data_is_never_acted_on(rig: Rig) -> None:
    deadline = T0 + 4 * HOUR
    assert rig.run(T0, [view(T0)]) == []  # seen from the start; no warnings seen since
    stale = [view(deadline, age=300.0)]  # newest sample 5 min old (limit 120 s)
    assert rig.run(deadline, stale) == ["skip:stale=skipped"]
    unknown = [view(deadline + 60, state=GpuState.UNKNOWN, age=30.0)]
    assert rig.run(deadline + 60, unknown) == []  # recorded once for the episode
    never_seen = [msgspec.structs.replace(view(deadline + 120), last_seen=None)]
    assert rig.run(deadline + 120, never_seen) == []
    one_of_two_stale = [view(deadline + 180), view(deadline + 180, age=600, index=1)]
    assert rig.run(deadline + 180, one_of_two_stale) == []
    assert rig.cluster.mutations() == []
    assert [e.facts.reason for e in rig.announced] == ["stale"]
    # fresh data again, still idle: the missed last warning first, with its 10 % of 4 h
    assert rig.run(deadline + 240, [view(deadline + 240)]) == ["warn:0.9=warned"]
    assert rig.announced[-1].facts.deadline == deadline + 240 + 0.1 * 4 * HOUR
    assert rig.run(deadline + 240 + 1439, [view(deadline + 240 + 1439)]) == []
    assert rig.run(deadline + 240 + 1440, [view(deadline + 240 + 1440)]) == ["act=acted"]


def test_an_active_gpu_means_no_action(rig: Rig) -> None:
    for minutes in range(0, 5 * 60, 5):
        now = T0 + minutes * 60
        views = [view(now), view(now, state=GpuState.ACTIVE, index=1)]
        assert rig.run(now, views) == []
    assert rig.cluster.calls == [] and rig.announced == []


@pytest.mark.parametrize("case", ["namespace", "user", "annotation"])
def test_exempt_namespaces_users_and_annotations(tmp_path: Path, case: str) -> None:
    policy = PolicySettings(
        mode="enforce", dry_run=False, release_after_seconds=HOUR, min_runtime_seconds=0
    )
    settings = {
        "namespace": {"exempt_namespaces": ["ml"]},
        "user": {"exempt_users": ["alice"]},
        "annotation": {},
    }[case]
    ref = REF if case != "annotation" else dataclasses.replace(REF, key="pod:ml/other")
    with make_rig(tmp_path, policy, **settings) as rig:
        rig.cluster.pods[("ml", "other")].annotations["gpufleet.io/exempt"] = "true"
        out = [rig.run(T0 + m * 600, [view(T0 + m * 600, ref=ref)], [rec(ref)]) for m in range(12)]
        assert [x for x in out if x] == [["skip:exempt=skipped"]]  # once, when the warning was due
        assert rig.cluster.mutations() == []
        assert [e.facts.reason for e in rig.announced] == ["exempt"]


def _fresh(tmp_path: Path) -> Path:
    n = len(list(tmp_path.iterdir()))
    path = tmp_path / f"rig{n}"
    path.mkdir()
    return path


def test_dry_run_and_notify_only_never_touch_the_cluster(tmp_path: Path) -> None:
    for mode, dry_run, final in [
        ("enforce", True, "act=dry_run"),
        ("notify", False, "notify_only=notify_only"),
    ]:
        policy = PolicySettings(
            mode=mode,
            dry_run=dry_run,
            release_after_seconds=HOUR,
            min_runtime_seconds=0,
            warn_at=[0.5],
        )
        with make_rig(_fresh(tmp_path), policy) as rig:
            out = [e for m in range(0, 120, 5) for e in rig.run(T0 + m * 60, [view(T0 + m * 60)])]
            assert out == ["warn:0.5=warned", final]
            assert rig.cluster.mutations() == []


def test_policy_off_by_default_does_nothing(tmp_path: Path) -> None:
    with make_rig(tmp_path, PolicySettings()) as rig:
        assert all(rig.run(T0 + h * HOUR, [view(T0 + h * HOUR)]) == [] for h in range(10))
        assert rig.cluster.calls == [] and rig.log.entries() == []


def test_min_runtime_moves_the_deadline(tmp_path: Path) -> None:
    policy = PolicySettings(
        mode="enforce",
        dry_run=False,
        release_after_seconds=HOUR,
        min_runtime_seconds=3 * HOUR,
        warn_at=[0.5],
    )
    with make_rig(tmp_path, policy) as rig:
        acted = [
            m
            for m in range(0, 240, 5)
            if rig.run(T0 + m * 60, [view(T0 + m * 60)]) == ["act=acted"]
        ]
        assert acted == [180]  # first seen at T0: runtime 3 h beats idle 1 h
