"""The view's ``idle_since`` counts buffered readings: followed as readings arrive, it must
equal the start of the idle episode the apply step finds once everything is applied (the
ground truth here), whatever the order of arrivals, applies and views."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.model import GpuInfo, GpuSample, Workload, WorkloadKind
from collector.fleet.rules import FleetRules
from collector.fleet.state import TrackedGpu
from collector.records import GpuState

T0 = 1_767_225_600.0
RULES = FleetRules(idle_threshold=0.01, stale_after_seconds=30.0, reorder_window_seconds=20.0)
INFO = GpuInfo(uuid="GPU-a", index=0, name="NVIDIA H100 80GB HBM3")
PODS = (None, Workload(kind=WorkloadKind.KUBERNETES_POD, id="a", name="a", namespace="ml"),
        Workload(kind=WorkloadKind.KUBERNETES_POD, id="b", name="b", namespace="ml"))  # fmt: skip
IDLE_STATES = (GpuState.ALLOCATED_IDLE, GpuState.UNALLOCATED)

reading = st.tuples(
    st.sampled_from([1.0, 10.0, 10.0, 10.0, 45.0, -5.0, 0.0]),  # step: gaps, late, duplicate
    st.sampled_from([0.0, 0.0, 0.5, None]),  # SM activity
    st.sampled_from([0.0, 0.0, 0.5, None]),  # DRAM activity
    st.sampled_from(range(len(PODS))),
)
step = st.one_of(
    st.tuples(st.just("buffer"), st.lists(reading, min_size=1, max_size=6)),
    st.tuples(st.just("apply"), st.sampled_from([0.0, 15.0, 40.0])),
    st.tuples(st.just("view"), st.just(0.0)),
)


def make(t: float, sm: float | None, dram: float | None, pod: int) -> GpuSample:
    holder = PODS[pod]
    return GpuSample(timestamp=T0 + t, gpu_uuid=INFO.uuid, sm_activity=sm, dram_activity=dram,
                     workloads=() if holder is None else (holder,))  # fmt: skip


def truth(gpu: TrackedGpu) -> float | None:
    """The open episode's start once everything buffered is applied."""
    applied = copy.deepcopy(gpu)
    applied.apply_ready(RULES, flush=True)
    return applied.episode_start


@settings(max_examples=300, deadline=None)
@given(st.lists(step, min_size=1, max_size=25))
def test_idle_since_equals_the_episode_start_once_applied(steps: list[tuple[str, object]]) -> None:
    gpu = TrackedGpu(info=INFO, node="n", model="H100")
    clock = 0.0
    for kind, arg in steps:
        if kind == "buffer":
            assert isinstance(arg, list)
            for dt, sm, dram, pod in arg:
                clock += dt
                gpu.buffer(make(clock, sm, dram, pod), RULES)
        elif kind == "apply":
            assert isinstance(arg, float)
            gpu.apply_ready(RULES, now=T0 + clock + arg)
        if gpu.newest is None:
            continue
        view = gpu.view(gpu.newest.timestamp, RULES)
        if view.state in IDLE_STATES:
            assert view.idle_since == truth(gpu)
