"""Recommendation rules: release, scale down, right-size (pricing plans: test_pricing.py)."""

from __future__ import annotations

import pytest

from collector.analysis.carbon import CarbonContext
from collector.analysis.cost import PriceBook
from collector.analysis.work_window import WorkloadWindow
from collector.config import AnalysisSettings
from collector.recommend.lifecycle import RecommendPolicy, evaluate
from collector.records import (
    GpuState,
    GpuView,
    ModelHour,
    ModelUsage,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    WorkloadProfile,
    WorkloadRef,
)
from tests.collector.recommend.pricing_curves import pool
from tests.collector.recommend.work_windows import throttled

NOW = 1_800_000_000.0
WINDOW = 1800.0
SETTINGS = AnalysisSettings(idle_window_seconds=WINDOW)
PRICES = PriceBook.example()  # H100 6.88 on demand, 4.27 reserved (USD)
CARBON = CarbonContext(pue=1.2, intensity_g_per_kwh=400.0)
POLICY = RecommendPolicy.default()
NOTEBOOK = WorkloadRef("pod:ml/notebook-7", "kubernetes_pod", "notebook-7", "ml")
TRAINING = WorkloadRef("slurm:42", "slurm_job", "42", "physics")


def gpu(uuid: str, state: GpuState, idle_for: float | None = None, node: str = "n1",
        holders: tuple[WorkloadRef, ...] = (), model: str = "H100",
        power: float | None = 70.0) -> GpuView:  # fmt: skip
    return GpuView(uuid=uuid, node=node, index=0, model=model, name=f"NVIDIA {model}",
                   state=state, last_seen=NOW, workloads=holders,
                   idle_since=None if idle_for is None else NOW - idle_for,
                   power_watts=power)  # fmt: skip


def run(gpus: list[GpuView] = [], profiles: list[WorkloadProfile] = [],  # noqa: B006
        models: list[ModelUsage] = [], prices: PriceBook = PRICES,  # noqa: B006
        hours: list[ModelHour] = [],  # noqa: B006
        windows: list[WorkloadWindow] = []) -> list[Recommendation]:  # noqa: B006  # fmt: skip
    return evaluate(gpus, profiles, models, prices, CARBON, SETTINGS, NOW, POLICY, hours=hours,
                    windows=windows)  # fmt: skip


def stuck(idle_for: float) -> list[GpuView]:
    return [gpu(f"GPU-{i}", GpuState.ALLOCATED_IDLE, idle_for, holders=(NOTEBOOK,))
            for i in range(2)]  # fmt: skip


def test_stuck_workload_gets_release_at_the_window_with_savings() -> None:
    assert run(stuck(WINDOW - 1)) == []
    [rec] = run(stuck(WINDOW))
    assert (rec.id, rec.kind, rec.status) == ("release_idle:pod:ml/notebook-7",
                                              RecommendationKind.RELEASE_IDLE,
                                              RecommendationStatus.OPEN)  # fmt: skip
    assert (rec.workload_key, rec.namespace, rec.node) == ("pod:ml/notebook-7", "ml", "n1")
    assert rec.gpu_uuids == ("GPU-0", "GPU-1")
    assert rec.evidence["idle_seconds"] == WINDOW and rec.evidence["window_seconds"] == WINDOW
    assert rec.savings.money_per_hour == pytest.approx(2 * 6.88)
    assert rec.savings.money_per_month == pytest.approx(2 * 6.88 * 730)
    assert rec.savings.energy_kwh_per_month == pytest.approx(140 * 730 / 1000)
    assert rec.savings.carbon_kg_per_month == pytest.approx(140 * 730 / 1000 * 1.2 * 0.4)
    assert rec.savings.currency == "USD"


def test_busy_partly_busy_and_unknown_workloads_get_no_release() -> None:
    busy = [gpu("GPU-0", GpuState.ACTIVE, holders=(TRAINING,))]
    partly = [gpu("GPU-1", GpuState.ACTIVE, holders=(NOTEBOOK,)),
              gpu("GPU-2", GpuState.ALLOCATED_IDLE, 5 * WINDOW, holders=(NOTEBOOK,))]  # fmt: skip
    unknown = [gpu("GPU-3", GpuState.UNKNOWN, holders=(TRAINING,))]
    assert run(busy) == run(partly) == run(unknown) == []


def test_shared_idle_gpu_counts_half_for_each_holder() -> None:
    shared = [gpu("GPU-0", GpuState.ALLOCATED_IDLE, WINDOW, holders=(NOTEBOOK, TRAINING))]
    recs = run(shared)
    assert [r.subject for r in recs] == ["pod:ml/notebook-7", "slurm:42"]
    assert all(r.savings.money_per_hour == pytest.approx(6.88 / 2) for r in recs)


def test_mig_instance_costs_its_slice() -> None:
    """The live fleet sets a slice's share (3g: 3/7 of the compute, the default basis;
    tests/collector/test_mig.py); the rule prices the view by it."""
    view = gpu("MIG-1", GpuState.ALLOCATED_IDLE, WINDOW, holders=(NOTEBOOK,))
    fields = {f: getattr(view, f) for f in GpuView.__slots__}
    mig = GpuView(**{**fields, "mig_profile": "3g.40gb", "price_fraction": 3 / 7})
    [rec] = run([mig])
    assert rec.savings.money_per_hour == pytest.approx(6.88 * 3 / 7)


def test_scale_down_only_whole_idle_nodes() -> None:
    gpus = [
        gpu("A", GpuState.UNALLOCATED, WINDOW, node="n2"),
        gpu("B", GpuState.UNALLOCATED, WINDOW + 60, node="n2"),
        gpu("C", GpuState.ACTIVE, node="n2", holders=(TRAINING,)),  # n2 runs work
        gpu("D", GpuState.UNALLOCATED, WINDOW, node="n4"),
        gpu("G", GpuState.UNALLOCATED, WINDOW - 1, node="n4"),  # not idle long enough yet
        gpu("E", GpuState.UNALLOCATED, WINDOW, node="n3", model="L4", power=None),
        gpu("F", GpuState.UNALLOCATED, 2 * WINDOW, node="n3", model="L4", power=None),
    ]
    [n3] = run(gpus)
    assert (n3.id, n3.gpu_uuids, n3.evidence["whole_node"]) == ("scale_down:n3", ("E", "F"), True)
    assert "node n3" in n3.title
    assert n3.savings.money_per_hour == pytest.approx(2 * 0.80)
    # L4 without a power reading: the catalogue's idle power (14 W)
    assert n3.savings.energy_kwh_per_month == pytest.approx(2 * 14 * 730 / 1000)


DAY = 24 * 3600.0
GB = 1_000_000_000


def profile(model: str, memory_p95: int, memory_peak: int, sm_peak: float,
            observed: float = 2 * DAY, count: int = 1) -> WorkloadProfile:  # fmt: skip
    return WorkloadProfile(NOTEBOOK, model, count, observed, memory_p95, memory_peak, sm_peak,
                           sm_peak / 2)  # fmt: skip


def test_right_size_small_notebook_to_a_mig_slice() -> None:
    [rec] = run(profiles=[profile("H100", 3 * GB, 4 * GB, 0.05)])
    assert rec.kind is RecommendationKind.RIGHT_SIZE
    assert rec.evidence["target"] == "H100 MIG 1g.10gb"
    assert rec.savings.money_per_hour == pytest.approx(6.88 * (1 - 1 / 7), rel=1e-5)


def test_right_size_honours_memory_headroom_and_compute() -> None:
    # 9 GB p95 + 20 % headroom = 10.8 GB: 1g.10gb is too small, 1g.20gb fits
    [rec] = run(profiles=[profile("H100", 9 * GB, 9 * GB, 0.05)])
    assert rec.evidence["target"] == "H100 MIG 1g.20gb"
    # a quarter of an A100's compute at peak needs 3g (3/7 = 0.43 >= 0.3 x 1.2)
    [rec] = run(profiles=[profile("A100", 14 * GB, 15 * GB, 0.3)])
    assert rec.evidence["target"] == "A100 MIG 3g.40gb"
    # priced as accounting prices a slice: 3/7 of the compute (the default basis)
    assert rec.savings.money_per_hour == pytest.approx(3.43 * (1 - 3 / 7), rel=1e-9)


def test_right_size_to_a_cheaper_model_without_mig() -> None:
    [rec] = run(profiles=[profile("L40S", 10 * GB, 12 * GB, 0.2, count=2)])
    assert rec.evidence["target"] == "L4"
    assert rec.savings.money_per_hour == pytest.approx(2 * (1.86 - 0.80))
    assert rec.savings.energy_kwh_per_month == pytest.approx(2 * (32 - 14) * 730 / 1000)


def test_no_right_size_when_short_lived_or_when_nothing_fits() -> None:
    assert run(profiles=[profile("H100", 3 * GB, 4 * GB, 0.05, observed=DAY - 1)]) == []
    assert run(profiles=[profile("H100", 70 * GB, 75 * GB, 0.9)]) == []
    assert run(profiles=[profile("GeForce RTX 4090", GB, GB, 0.01)]) == []


def test_every_declared_kind_is_one_a_rule_produces() -> None:
    """The kinds the collector exports (``gpufleet_recommendations_open``) and the dashboards
    list are the ones ``evaluate`` can make: a declared kind that nothing produces would show
    as a permanent zero, promising a recommendation that never comes."""
    spread = [  # n3's job fits on n4's free GPU: n3 can go
        gpu("J", GpuState.ACTIVE, node="n3", holders=(TRAINING,)),
        gpu("K", GpuState.UNALLOCATED, WINDOW, node="n3"),
        gpu("L", GpuState.ACTIVE, node="n4", holders=(TRAINING,)),
        gpu("M", GpuState.UNALLOCATED, WINDOW, node="n4"),
    ]
    gpus = [*stuck(WINDOW), gpu("A", GpuState.UNALLOCATED, WINDOW, node="n2"), *spread]
    models, hours = pool([8.0], gpu_count=8)  # 8 of 8 allocated all month: reserve them
    recs = run(gpus, [profile("H100", 3 * GB, 4 * GB, 0.05)], models, hours=hours,
               windows=[throttled()])  # fmt: skip
    assert {rec.kind for rec in recs} == set(RecommendationKind)
