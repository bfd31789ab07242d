"""Shared GPUs: the price rule, each holder's own use, and its part of a run of intervals."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.model import GpuSample, ProcessSample, Workload, WorkloadKind
from collector.analysis.energy import workload_ref, workload_shares
from collector.analysis.shared import holder_activity, price_fractions, shared_parts, shared_use
from collector.analysis.usage import IntervalSums
from collector.records import ACTIVE, IDLE, UNKNOWN, Activity, Interval, SharedUse

THRESHOLD = 0.01


def pod(name: str, share: float | None = None) -> Workload:
    return Workload(kind=WorkloadKind.KUBERNETES_POD, id=name, name=name, namespace="ml",
                    gpu_sharing="hami" if share is not None else "time_slicing",
                    gpu_share=share)  # fmt: skip


def test_declared_shares_that_fit_are_kept_and_the_rest_is_unallocated() -> None:
    assert price_fractions({"a": 0.2, "b": 0.5}) == {"a": 0.2, "b": 0.5}


def test_undeclared_or_overbooked_shares_split_equally() -> None:
    assert price_fractions({"a": 0.2, "b": None}) == {"a": 0.5, "b": 0.5}
    assert price_fractions({"a": 0.7, "b": 0.6, "c": 0.1}) == dict.fromkeys("abc", 1 / 3)
    assert price_fractions({}) == {}


@given(st.dictionaries(st.integers(0, 20), st.none() | st.floats(0, 1), min_size=1))
def test_fractions_never_add_up_to_more_than_the_gpu(declared: dict[int, float | None]) -> None:
    fractions = price_fractions(declared)
    assert fractions.keys() == declared.keys()
    assert all(0 <= f <= 1 for f in fractions.values())
    assert math.fsum(fractions.values()) <= 1 + 1e-9


def sample(*processes: ProcessSample, workloads: tuple[Workload, ...]) -> GpuSample:
    return GpuSample(timestamp=1.0, gpu_uuid="GPU-1", sm_activity=0.6, workloads=workloads,
                     processes=processes)  # fmt: skip


def use_of(s: GpuSample) -> SharedUse:
    shares = workload_shares(s)
    use = shared_use(s, {ref.key: ref for ref in shares})
    assert use is not None
    return use


def test_own_sm_share_and_memory_from_each_holders_processes() -> None:
    a, b, c = pod("a"), pod("b"), pod("c")
    s = sample(ProcessSample(pid=1, sm_share=0.4, used_memory_bytes=10, workload=a),
               ProcessSample(pid=2, sm_share=0.2, used_memory_bytes=5, workload=a),
               ProcessSample(pid=3, sm_share=0.0, used_memory_bytes=7, workload=b),
               workloads=(a, b, c))  # fmt: skip
    use = use_of(s)
    ra, rb, rc = (workload_ref(w) for w in (a, b, c))
    assert math.isclose(use.sm_shares[ra] or 0.0, 0.6)
    assert (use.sm_shares[rb], use.sm_shares[rc]) == (0.0, 0.0)
    assert use.memory_bytes == {ra: 15, rb: 7, rc: None}
    assert use.fractions == dict.fromkeys((ra, rb, rc), 1 / 3)


def test_without_any_per_process_share_holders_follow_the_gpu() -> None:
    a, b = pod("a"), pod("b")
    use = use_of(sample(ProcessSample(pid=1, workload=a), workloads=(a, b)))
    assert set(use.sm_shares.values()) == {None}
    assert holder_activity(ACTIVE, None, THRESHOLD) is ACTIVE


def test_an_unshared_gpu_has_no_shared_use() -> None:
    a = pod("a")
    s = sample(workloads=(a,))
    assert shared_use(s, {a.key: workload_ref(a)}) is None
    declared = pod("h", 0.3)
    lone = shared_use(sample(workloads=(declared,)), {declared.key: workload_ref(declared)})
    assert lone is not None and lone.fractions == {workload_ref(declared): 0.3}


def test_holder_activity_is_idle_only_below_the_threshold_on_a_busy_gpu() -> None:
    assert holder_activity(ACTIVE, 0.0, THRESHOLD) is IDLE
    assert holder_activity(ACTIVE, 0.5, THRESHOLD) is ACTIVE
    assert holder_activity(IDLE, 0.5, THRESHOLD) is IDLE
    assert holder_activity(UNKNOWN, 0.0, THRESHOLD) is UNKNOWN


def test_parts_of_a_busy_hour_price_by_fraction_and_energy_by_use() -> None:
    a, b = pod("a", 0.2), pod("b", 0.5)
    s = sample(ProcessSample(pid=1, sm_share=0.6, workload=a),
               ProcessSample(pid=2, sm_share=0.0, workload=b), workloads=(a, b))  # fmt: skip
    use, shares = use_of(s), workload_shares(s)
    sums = IntervalSums()
    sums.add(Interval("GPU-1", "n", "H100", 0.0, 3600.0, ACTIVE, 3.6e6, False, shares), 1.0, 0)
    parts = shared_parts(sums, 10.0, shares, use, THRESHOLD)
    ra, rb = workload_ref(a), workload_ref(b)
    assert (parts[ra].active_seconds, parts[ra].idle_seconds) == (720.0, 0.0)
    assert (parts[rb].active_seconds, parts[rb].idle_seconds) == (0.0, 1800.0)
    assert math.isclose(parts[ra].cost, 2.0) and math.isclose(parts[rb].idle_cost, 5.0)
    assert (parts[ra].energy_joules, parts[rb].energy_joules) == (3.6e6, 0.0)
    assert parts[ra].cost + parts[rb].cost <= sums.usage(10.0, allocated=True).cost
    # used: a's own 60 % of the GPU, at most the 20 % it holds; b's none
    assert (parts[ra].sm_activity_seconds, parts[rb].sm_activity_seconds) == (720.0, 0.0)


@given(
    st.lists(st.tuples(st.none() | st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=6),
    st.sampled_from([ACTIVE, IDLE, UNKNOWN]),
    st.floats(0, 100),
)
def test_holders_never_cost_more_than_the_gpu_nor_idle_longer_than_they_hold(
    holders: list[tuple[float | None, float]], activity: Activity, price: float
) -> None:
    workloads = tuple(pod(f"p{i}", share) for i, (share, _) in enumerate(holders))
    sm_shares = [sm for _, sm in holders]
    procs = tuple(
        ProcessSample(pid=i, sm_share=sm_shares[i], workload=w) for i, w in enumerate(workloads)
    )
    s = sample(*procs, workloads=workloads)
    shares = workload_shares(s)
    use = shared_use(s, {ref.key: ref for ref in shares})
    if use is None:  # one holder that declared nothing: not shared
        return
    sums = IntervalSums()
    sums.add(Interval("GPU-1", "n", "H100", 0.0, 600.0, activity, 1e5, False, shares), 1.0, 0)
    gpu = sums.usage(price, allocated=True)
    parts = shared_parts(sums, price, shares, use, THRESHOLD)
    assert math.fsum(p.cost for p in parts.values()) <= gpu.cost * (1 + 1e-9) + 1e-12
    assert math.fsum(p.energy_joules for p in parts.values()) == pytest.approx(gpu.energy_joules)
    for ref, part in parts.items():
        held = use.fractions[ref] * (gpu.active_seconds + gpu.idle_seconds)
        assert part.idle_seconds <= held * (1 + 1e-9) + 1e-12
        assert part.active_seconds + part.idle_seconds == pytest.approx(held)
        assert 0.0 <= part.sm_activity_seconds <= held * (1 + 1e-9) + 1e-12  # mean in 0..1
