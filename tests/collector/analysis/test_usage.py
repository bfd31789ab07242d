"""One interval into Usage: seconds by activity, energy, cost, carbon, and workload shares."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.analysis.usage import IntervalSums, account_interval, workload_part
from collector.records import Activity, Interval, Usage, WorkloadRef

A = WorkloadRef("pod:ml/a", "kubernetes_pod", "a", "ml")
B = WorkloadRef("pod:ml/b", "kubernetes_pod", "b", "ml")


def interval(activity: Activity, shares: dict[WorkloadRef, float], energy: float = 3.6e6,
             estimated: bool = False) -> Interval:  # fmt: skip
    return Interval("GPU-1", "n1", "H100", 0.0, 3600.0, activity, energy, estimated, shares)


def test_allocated_idle_hour() -> None:
    gpu, per = account_interval(interval(Activity.IDLE, {A: 1.0}), 6.0, 1.5, 400.0)
    assert gpu == Usage(idle_seconds=3600, allocated_idle_seconds=3600, energy_joules=3.6e6,
                        idle_energy_joules=3.6e6, idle_cost=6.0, cost=6.0,
                        carbon_grams=600.0)  # fmt: skip
    assert per == {A: gpu}


def test_unallocated_idle_is_not_allocated_idle() -> None:
    gpu, per = account_interval(interval(Activity.IDLE, {}), 6.0, 1.0, 0.0)
    assert (gpu.idle_seconds, gpu.allocated_idle_seconds, gpu.idle_cost, per) == (3600, 0, 6, {})


def test_active_shared_interval_splits_everything() -> None:
    gpu, per = account_interval(interval(Activity.ACTIVE, {A: 0.75, B: 0.25}, estimated=True),
                                4.0, 1.0, 100.0)  # fmt: skip
    assert (gpu.active_seconds, gpu.cost, gpu.idle_cost) == (3600, 4.0, 0.0)
    assert gpu.estimated_energy_joules == 3.6e6
    assert per[A].active_seconds == 2700 and per[B].energy_joules == 0.9e6
    assert per[A].cost == pytest.approx(3.0) and per[B].carbon_grams == pytest.approx(25.0)


def test_unknown_seconds_cost_nothing_but_energy_counts() -> None:
    gpu, _ = account_interval(interval(Activity.UNKNOWN, {A: 1.0}), 4.0, 1.0, 100.0)
    assert (gpu.unknown_seconds, gpu.cost, gpu.energy_joules) == (3600, 0.0, 3.6e6)
    assert gpu.carbon_grams == pytest.approx(100.0)


@given(
    st.sampled_from(list(Activity)),
    st.floats(0, 1e5), st.floats(-10, 1e5), st.floats(0, 1e9), st.floats(0, 100),
    st.lists(st.floats(0.001, 1.0), max_size=5), st.booleans(),
)  # fmt: skip
def test_invariants(
    activity: Activity, start: float, seconds: float, energy: float, price: float,
    weights: list[float], estimated: bool,
) -> None:  # fmt: skip
    total = math.fsum(weights)
    refs = [WorkloadRef(f"pod:ns/w{i}", "kubernetes_pod", f"w{i}") for i in range(len(weights))]
    shares = {r: w / total for r, w in zip(refs, weights, strict=True)}
    iv = Interval("GPU-1", "n", "H100", start, start + seconds, activity, energy, estimated, shares)
    gpu, per = account_interval(iv, price, 1.2, 300.0)
    span = max(0.0, iv.end - iv.start)  # the interval as floats represent it
    assert gpu.active_seconds + gpu.idle_seconds + gpu.unknown_seconds == pytest.approx(span)
    assert all(getattr(u, f) >= 0 for u in [gpu, *per.values()] for f in Usage.__struct_fields__)
    assert gpu.idle_cost <= gpu.cost + 1e-12
    if per:
        for name in ("energy_joules", "idle_seconds", "cost", "carbon_grams"):
            parts = math.fsum(getattr(u, name) for u in per.values())
            assert parts == pytest.approx(getattr(gpu, name), rel=1e-9, abs=1e-9), name


def test_usage_add_adds_every_field() -> None:
    names = Usage.__struct_fields__
    one = Usage(**{name: float(i + 1) for i, name in enumerate(names)})
    total = Usage(**{name: 100.0 * (i + 1) for i, name in enumerate(names)})
    total.add(one)
    assert [getattr(total, n) for n in names] == [101.0 * (i + 1) for i in range(len(names))]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(Activity)),
            st.floats(0.0, 60.0),
            st.floats(0.0, 1e5),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_summing_a_run_of_intervals_equals_accounting_each(
    run: list[tuple[Activity, float, float, bool]],
) -> None:
    """The accountant sums a run of intervals (same hour, same holders) before it builds
    Usage; that must equal accounting the intervals one by one."""
    shares = {A: 0.25, B: 0.75}
    sums, start = IntervalSums(), 0.0
    one_by_one = Usage()
    parts = {A: Usage(), B: Usage()}
    for activity, seconds, joules, estimated in run:
        iv = Interval("G", "n", "H100", start, start + seconds, activity, joules, estimated, shares)
        start += seconds
        sums.add(iv, 1.2, 300.0)
        gpu, per = account_interval(iv, 4.0, 1.2, 300.0)
        one_by_one.add(gpu)
        for ref, part in per.items():
            parts[ref].add(part)
    summed = sums.usage(4.0, allocated=True)
    for name in Usage.__struct_fields__:
        assert getattr(summed, name) == pytest.approx(getattr(one_by_one, name), rel=1e-12)
        for ref, share in shares.items():
            expected = getattr(parts[ref], name)
            assert getattr(workload_part(summed, share), name) == pytest.approx(expected, rel=1e-12)


def test_sm_activity_seconds_cover_the_known_seconds_with_a_reading() -> None:
    """SM activity x seconds: active and idle seconds count at their starting sample's SM
    activity; unknown seconds and seconds with no SM reading add nothing."""
    readings = [  # (activity, seconds, sm_activity)
        (Activity.ACTIVE, 600.0, 0.8),
        (Activity.ACTIVE, 300.0, None),  # DRAM-active, the GPU gave no SM reading
        (Activity.IDLE, 1200.0, 0.005),
        (Activity.UNKNOWN, 900.0, 0.9),  # stale: not held time, not counted
        (Activity.ACTIVE, 600.0, 1.2),  # past the physical bound: counts as 1
    ]
    sums, start = IntervalSums(), 0.0
    for activity, seconds, sm in readings:
        iv = Interval("G", "n", "H100", start, start + seconds, activity, 0.0, False, {A: 1.0},
                      sm_activity=sm)  # fmt: skip
        sums.add(iv, 1.0, 0.0)
        start += seconds
    gpu = sums.usage(4.0, allocated=True)
    assert gpu.sm_activity_seconds == pytest.approx(0.8 * 600 + 0.005 * 1200 + 600)
    part = workload_part(gpu, 0.25)
    assert part.sm_activity_seconds == pytest.approx(gpu.sm_activity_seconds / 4)
    held = gpu.active_seconds + gpu.idle_seconds
    assert gpu.sm_activity_seconds / held == pytest.approx((480 + 6 + 600) / 2700)
