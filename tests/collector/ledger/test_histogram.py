"""Right-sizing histograms: p95 and peak from merged buckets within 5 % of exact."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.ledger.histogram import MEMORY_BUCKETS, SM_ACTIVITY_BUCKETS, histogram_quantile
from collector.ledger.store import Ledger, LedgerWrite, WorkloadStatsDelta
from collector.records import WorkloadRef

GIB = 2**30
memories = st.lists(st.integers(min_value=2**20, max_value=200 * GIB), min_size=1, max_size=300)
activities = st.lists(st.floats(min_value=1e-3, max_value=1.0), min_size=1, max_size=300)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@given(memories, st.integers(min_value=1, max_value=5))
def test_memory_p95_within_4_percent_over_merged_deltas(values: list[int], parts: int) -> None:
    deltas = [WorkloadStatsDelta() for _ in range(parts)]
    for i, value in enumerate(values):
        deltas[i % parts].observe(1.0, value, None)
    merged: dict[int, float] = {}
    for delta in deltas:
        for bucket, seconds in delta.memory_seconds.items():
            merged[bucket] = merged.get(bucket, 0.0) + seconds
    peak = max(d.memory_peak_bytes for d in deltas)
    assert peak == max(values)
    exact = nearest_rank([float(v) for v in values], 0.95)
    got = histogram_quantile(merged, 0.95, MEMORY_BUCKETS, peak)
    assert exact * (1 - 1e-12) <= got <= exact * 1.04


@given(activities, st.sampled_from([0.5, 0.95, 0.99, 1.0]))
def test_activity_quantiles_within_4_percent(values: list[float], q: float) -> None:
    delta = WorkloadStatsDelta()
    for value in values:
        delta.observe(1.0, None, value)
    exact = nearest_rank(values, q)
    got = histogram_quantile(delta.sm_activity_seconds, q, SM_ACTIVITY_BUCKETS, max(values))
    assert exact * (1 - 1e-12) <= got <= exact * 1.04
    assert delta.observed_seconds == len(values)


def test_below_floor_is_absolute_and_empty_is_zero() -> None:
    delta = WorkloadStatsDelta()
    for value in (0, 0, 1000):
        delta.observe(2.0, value, 0.0)
    assert histogram_quantile(delta.memory_seconds, 0.95, MEMORY_BUCKETS, 1000) == 1000
    assert histogram_quantile(delta.sm_activity_seconds, 0.95, SM_ACTIVITY_BUCKETS, 0.0) == 0.0
    assert histogram_quantile({}, 0.95, MEMORY_BUCKETS, 0) == 0.0


@settings(max_examples=25, deadline=None)
@given(memories)
def test_ledger_profile_matches_exact_p95(
    tmp_path_factory: pytest.TempPathFactory, values: list[int]
) -> None:
    path = tmp_path_factory.mktemp("h") / "ledger.db"
    ref = WorkloadRef(key="pod:ml/a", kind="kubernetes_pod", name="a")
    with Ledger.open(str(path), synchronous="NORMAL") as ledger:
        ledger.commit(LedgerWrite(workloads={ref.key: ref}))
        for chunk in range(0, len(values), 50):  # several commits merge in SQL
            delta = WorkloadStatsDelta(last_seen=10.0)
            for value in values[chunk : chunk + 50]:
                delta.observe(1.0, value, 0.5)
            ledger.commit(LedgerWrite(workload_stats={ref.key: delta}))
        [profile] = ledger.workload_profiles(now=10.0)
    exact = nearest_rank([float(v) for v in values], 0.95)
    assert profile.memory_peak_bytes == max(values)
    assert exact - 1 <= profile.memory_p95_bytes <= exact * 1.04 + 1
    assert profile.observed_seconds == len(values)
