"""Interval energy (counter, reload, power fallback) and attribution to workloads."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.model import SLURM_ACCOUNT_LABEL, GpuSample, ProcessSample, Workload, WorkloadKind
from collector.analysis.energy import (
    interval_energy,
    split_mig_energy,
    workload_ref,
    workload_shares,
)
from collector.records import WorkloadRef


def s(
    ts: float, energy: float | None = None, power: float | None = None, **kw: object
) -> GpuSample:
    return GpuSample(timestamp=ts, gpu_uuid="GPU-1", energy_joules=energy, power_watts=power,
                     **kw)  # type: ignore[arg-type]  # fmt: skip


def test_counter_delta_is_exact() -> None:
    assert interval_energy(s(0, 1000.0, 50), s(10, 1700.0, 90)) == (700.0, False, False)


def test_counter_decrease_is_a_reload_and_falls_back_to_trapezoid() -> None:
    assert interval_energy(s(0, 9e6, 100), s(10, 200.0, 300)) == (2000.0, True, False)


def test_no_counter_trapezoid_then_rectangle_then_nothing() -> None:
    assert interval_energy(s(0, None, 100), s(4, None, 200)) == (600.0, True, False)
    assert interval_energy(s(0, 10.0, 100), s(4, None, None)) == (400.0, True, False)
    assert interval_energy(s(0, None, None), s(4, None, 50)) == (200.0, True, False)
    assert interval_energy(s(0), s(4)) == (0.0, True, False)


def test_across_a_gap_only_a_counter_delta_counts() -> None:
    """A gap (an unknown interval) keeps an exact counter delta; power integrated over it
    would invent energy, as across a node clock stepped back an hour (issue 17)."""
    assert interval_energy(s(0, 1000.0, 50), s(900, 91000.0, 90), gap=True) == (
        90000.0,
        False,
        False,
    )
    assert interval_energy(s(0, 9e6, 300), s(2720, 200.0, 300), gap=True) == (0.0, True, False)
    assert interval_energy(s(0, None, 300), s(2720, None, 300), gap=True) == (0.0, True, False)


def test_time_not_advancing_gives_zero_without_counter() -> None:
    assert interval_energy(s(5, None, 100), s(5, None, 100)) == (0.0, True, False)


@given(
    st.floats(0, 1e6), st.floats(0, 1e12) | st.none(), st.floats(0, 1e12) | st.none(),
    st.floats(0, 1500) | st.none(), st.floats(0, 1500) | st.none(), st.floats(0, 3600),
)  # fmt: skip
def test_energy_is_never_negative(
    t0: float, e0: float | None, e1: float | None, p0: float | None, p1: float | None, dt: float
) -> None:
    joules, estimated, _ = interval_energy(s(t0, e0, p0), s(t0 + dt, e1, p1))
    assert joules >= 0.0 and math.isfinite(joules)
    assert estimated == (e0 is None or e1 is None or e1 < e0)


POD_A = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid-a", name="a", namespace="ml", team="t")
POD_B = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid-b", name="b", namespace="ml")
JOB = Workload(
    kind=WorkloadKind.SLURM_JOB,
    id="42",
    slurm_job_id="42",
    user="ana",
    labels={SLURM_ACCOUNT_LABEL: "physics"},
)


def test_workload_ref_keeps_key_and_reporting_labels() -> None:
    assert workload_ref(POD_A) == WorkloadRef("pod:ml/a", "kubernetes_pod", "a", "ml", "t", "")
    assert workload_ref(JOB) == WorkloadRef(
        "slurm:42", "slurm_job", "42", "physics", "", "ana", owner="User/ana"
    )  # a Slurm job's owner is the user who submitted it


def proc(w: Workload, share: float | None) -> ProcessSample:
    return ProcessSample(pid=hash(w.id) % 1000, sm_share=share, workload=w)


def test_shares_exclusive_none_and_duplicates() -> None:
    assert workload_shares(s(0, workloads=(POD_A,))) == {workload_ref(POD_A): 1.0}
    assert workload_shares(s(0, workloads=(POD_A, POD_A))) == {workload_ref(POD_A): 1.0}
    assert workload_shares(s(0)) == {}


def test_shared_gpu_splits_by_sm_share() -> None:
    sample = s(0, workloads=(POD_A, POD_B),
               processes=(proc(POD_A, 0.3), proc(POD_A, 0.3), proc(POD_B, 0.2)))  # fmt: skip
    shares = workload_shares(sample)
    assert shares[workload_ref(POD_A)] == pytest.approx(0.75)
    assert shares[workload_ref(POD_B)] == pytest.approx(0.25)


@pytest.mark.parametrize("share", [None, 0.0])
def test_shared_gpu_without_shares_splits_equally(share: float | None) -> None:
    sample = s(0, workloads=(POD_A, POD_B), processes=(proc(POD_A, share),))
    assert set(workload_shares(sample).values()) == {0.5}


def mig(uuid: str, sm: float | None) -> tuple[str, float | None]:
    return uuid, sm


def test_mig_split_by_activity_and_equal_when_unknown() -> None:
    parts = split_mig_energy(900.0, [mig("MIG-a", 0.6), mig("MIG-b", 0.3), mig("MIG-c", 0.0)])
    assert parts == pytest.approx({"MIG-a": 600.0, "MIG-b": 300.0, "MIG-c": 0.0})
    assert split_mig_energy(90.0, [mig("MIG-a", None), mig("MIG-b", 0.0), mig("MIG-c", None)]) == (
        pytest.approx({"MIG-a": 30.0, "MIG-b": 30.0, "MIG-c": 30.0}))  # fmt: skip
    assert split_mig_energy(90.0, []) == {}


@given(st.floats(0, 1e9), st.lists(st.floats(0, 1) | st.none(), min_size=1, max_size=7))
def test_mig_parts_sum_to_parent_and_are_nonnegative(
    parent: float, activity: list[float | None]
) -> None:
    parts = split_mig_energy(parent, [mig(f"MIG-{i}", a) for i, a in enumerate(activity)])
    assert len(parts) == len(activity)
    assert all(v >= 0 for v in parts.values())
    assert math.fsum(parts.values()) == pytest.approx(parent, rel=1e-12, abs=1e-9)


def test_a_counter_jump_past_what_the_gpu_can_draw_is_estimated_from_power() -> None:
    """A 700 W-bound GPU over 10 s (+1 s of slack) can use 7,700 J; a counter saying
    more is no measurement: the interval is integrated from power, and flagged."""
    assert interval_energy(s(0, 0.0, 100), s(10, 7700.0, 300), 700.0) == (7700.0, False, False)
    assert interval_energy(s(0, 0.0, 100), s(10, 1e15, 300), 700.0) == (2000.0, True, True)
    assert interval_energy(s(0, 0.0), s(10, 1e15), 700.0) == (0.0, True, True)
