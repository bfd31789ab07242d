"""Replaying the 7-pod Alibaba GenAI 2026 sample against the table in its SOURCE.md.

Gap treatment. The trace's utilisation series has holes the memory series has not; a
replayed point without a utilisation reading has ``sm_activity is None`` (unknown), never 0.
The table's "longest run of consecutive zero samples" counts recorded utilisation samples in
order and steps over holes (a hole neither extends nor ends a run); ``zero_runs`` below
reproduces that exactly. Our idle semantics (unknown is never idle) end an episode at a
hole; that stricter figure is asserted too, and is smaller exactly for the pods with holes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from agent.model import GpuSample, WorkloadKind
from agent.sources.replay.source import ReplaySource
from tests.paths import FIXTURES

FIXTURE = FIXTURES / "replay" / "alibaba-genai-2026-7pods.tar.gz"
GIB = 1024**3


@dataclass(frozen=True)
class Expected:
    util_samples: int
    first: float
    last: float
    mean_pct: float
    zero_fraction: float
    max_pct: float
    longest_zero_run: int
    run_minutes: float
    mean_memory_gib: float
    memory_samples: int


# ../shared/reference/traces/alibaba-genai-2026/SOURCE.md, "The 7 pods in the sample"
TABLE = {
    "87b9247b": Expected(1222, 1662858720, 1662940800, 0.01, 0.998, 7.6, 1162, 1311.0, 17.3, 1441),
    "673d3687": Expected(1440, 1662858720, 1662940800, 0.01, 0.997, 6.8, 1385, 1315.8, 17.3, 1441),
    "9f86ada5": Expected(73, 1662936696, 1662940800, 0.02, 0.973, 0.9, 70, 65.5, 16.2, 73),
    "e776c139": Expected(1441, 1662858720, 1662940800, 5.77, 0.656, 74.9, 246, 232.8, 21.7, 1441),
    "ae3389e2": Expected(1441, 1662858720, 1662940800, 5.78, 0.667, 71.1, 69, 64.6, 23.1, 1441),
    "3ed83727": Expected(992, 1662858720, 1662940800, 20.38, 0.559, 98.8, 40, 93.1, 27.4, 1441),
    "2e6ae913": Expected(832, 1662858720, 1662940800, 27.87, 0.474, 98.3, 30, 85.5, 27.4, 1441),
}  # fmt: skip
#: pods whose utilisation series has holes (fewer utilisation than memory samples)
WITH_HOLES = {"87b9247b", "673d3687", "3ed83727", "2e6ae913"}


@pytest.fixture(scope="module")
def per_pod() -> dict[str, list[GpuSample]]:
    source = ReplaySource(FIXTURE)
    pods: dict[str, list[GpuSample]] = {}
    for sample in source.recorded_samples():
        (workload,) = sample.workloads
        pods.setdefault(str(workload.name), []).append(sample)
    return pods


def zero_runs(samples: list[GpuSample], unknown_ends_run: bool) -> tuple[int, float]:
    """(longest run of zero utilisation samples, its span in minutes)."""
    best, best_span, count, started = 0, 0.0, 0, 0.0
    for s in samples:
        if s.sm_activity is None:
            count = 0 if unknown_ends_run else count
            continue
        if s.sm_activity != 0.0:
            count = 0
            continue
        started = s.timestamp if count == 0 else started
        count += 1
        if count > best:
            best, best_span = count, (s.timestamp - started) / 60.0
    return best, best_span


def test_every_pod_becomes_a_gpu_held_by_a_pod() -> None:
    source = ReplaySource(FIXTURE)
    infos = source.discover()
    assert [i.index for i in infos] == list(range(7))
    assert source.step_seconds == 57.0
    assert (source.start, source.end) == (1662858720.0, 1662940800.0)
    first = source.read(1662858720.0)
    assert len(first) == 6  # 9f86ada5 starts late
    for s in first:
        (w,) = s.workloads
        assert w.kind is WorkloadKind.KUBERNETES_POD and s.gpu_uuid.startswith("GPU-")
        assert s.gpu_uuid.replace("-", "")[3:] == w.id  # GPU-<the pod's MD5>


@pytest.mark.parametrize("pod", sorted(TABLE))
def test_pod_figures_match_the_source_table(pod: str, per_pod: dict[str, list[GpuSample]]) -> None:
    expected = TABLE[pod]
    samples = per_pod[pod]
    util = [s for s in samples if s.sm_activity is not None]
    values = [100.0 * (s.sm_activity or 0.0) for s in util]
    assert all(s.activity_coarse for s in util)
    assert len(util) == expected.util_samples
    assert (util[0].timestamp, util[-1].timestamp) == (expected.first, expected.last)
    assert round(sum(values) / len(values), 2) == expected.mean_pct
    assert round(sum(v == 0.0 for v in values) / len(values), 3) == expected.zero_fraction
    assert round(max(values), 1) == expected.max_pct
    run, minutes = zero_runs(samples, unknown_ends_run=False)
    assert (run, round(minutes, 1)) == (expected.longest_zero_run, expected.run_minutes)
    memory = [s.memory_used_bytes for s in samples if s.memory_used_bytes is not None]
    assert len(memory) == expected.memory_samples
    assert round(sum(memory) / len(memory) / GIB, 1) == expected.mean_memory_gib


@pytest.mark.parametrize("pod", sorted(TABLE))
def test_holes_are_unknown_and_end_idle_runs(pod: str, per_pod: dict[str, list[GpuSample]]) -> None:
    samples = per_pod[pod]
    strict, _ = zero_runs(samples, unknown_ends_run=True)
    unknown = sum(s.sm_activity is None for s in samples)
    assert unknown == TABLE[pod].memory_samples - TABLE[pod].util_samples
    if pod in WITH_HOLES:
        assert unknown > 0 and strict < TABLE[pod].longest_zero_run
    else:
        assert unknown == 0 and strict == TABLE[pod].longest_zero_run


def test_read_in_a_utilisation_hole_says_unknown_not_zero(
    per_pod: dict[str, list[GpuSample]],
) -> None:
    """The memory point in the hole carries the last duty cycle while it holds (1.5 steps,
    85.5 s); from then on the activity is unknown, and the memory still reads."""
    source = ReplaySource(FIXTURE)
    samples = per_pod["3ed83727"]
    at = next(i for i, s in enumerate(samples) if s.sm_activity is None)
    hole, before = samples[at], samples[at - 1]
    assert before.sm_activity is not None and hole.timestamp - before.timestamp == 57.0

    def read(t: float) -> GpuSample:
        (sample,) = [s for s in source.read(t) if s.gpu_uuid == hole.gpu_uuid]
        assert sample.timestamp == t and sample.memory_used_bytes == hole.memory_used_bytes
        return sample

    held = read(hole.timestamp + 10.0)
    assert held.sm_activity == before.sm_activity and held.activity_coarse
    assert read(before.timestamp + 85.5).sm_activity is None


def test_a_pod_yields_nothing_before_it_starts_or_after_it_ends() -> None:
    source = ReplaySource(FIXTURE)
    late = TABLE["9f86ada5"].first
    assert len(source.read(late - 1.0)) == 6 and len(source.read(late)) == 7
    assert len(source.read(source.end + 1.5 * 57.0 - 0.01)) == 7
    assert source.read(source.end + 1.5 * 57.0) == []


@pytest.mark.parametrize("pod", ["2e6ae913", "e776c139"])  # with holes, without
def test_polling_read_sees_each_duty_cycle_point_held_for_one_and_a_half_steps(
    pod: str, per_pod: dict[str, list[GpuSample]]
) -> None:
    """The agent's replay source, polled every 0.5 s (the hold ends on that grid), reads
    each recorded duty cycle until the next one or 1.5 steps (85.5 s), the last one too,
    whatever the memory series records in between: the rule ``gpufleet replay`` uses."""
    duty = [s for s in per_pod[pod] if s.sm_activity is not None]
    truth = {"idle": 0.0, "active": 0.0}
    for i, point in enumerate(duty):
        until = point.timestamp + 85.5
        if i + 1 < len(duty):
            until = min(until, duty[i + 1].timestamp)
        truth["idle" if point.sm_activity == 0.0 else "active"] += until - point.timestamp
    source = ReplaySource(FIXTURE)
    gpu_uuid = per_pod[pod][0].gpu_uuid
    polled = {"idle": 0.0, "active": 0.0, "unknown": 0.0}
    t = per_pod[pod][0].timestamp
    while reading := [s for s in source.read(t) if s.gpu_uuid == gpu_uuid]:
        (sample,) = reading
        state = "unknown" if sample.sm_activity is None else "active"
        polled["idle" if sample.sm_activity == 0.0 else state] += 0.5
        t += 0.5
    assert (polled["idle"], polled["active"]) == (truth["idle"], truth["active"])
    assert t == per_pod[pod][-1].timestamp + 85.5  # then the GPU is gone
