"""SeriesBuffer: per-minute buckets of recent samples, held to hand-computed figures."""

from __future__ import annotations

import tracemalloc

import pytest

from agent.model import GpuSample
from collector.web import series as series_module
from collector.web.series import SeriesBuffer

T0 = 1_767_225_600.0  # a whole minute (2026-01-01T00:00:00Z)


def sample(at: float, sm: float | None = 0.5, gpu: str = "a", **fields: object) -> GpuSample:
    return GpuSample(timestamp=at, gpu_uuid=f"GPU-{gpu}", sm_activity=sm, **fields)  # type: ignore[arg-type]


def test_a_bucket_holds_means_of_activity_and_power_and_the_peak_of_memory() -> None:
    series = SeriesBuffer(resolution_seconds=60, retention_seconds=600)
    series.add([
        sample(T0 + 0, 0.2, power_watts=100.0, memory_used_bytes=4, memory_total_bytes=80),
        sample(T0 + 20, 0.4, power_watts=200.0, memory_used_bytes=9),
        sample(T0 + 40, None, power_watts=None, memory_used_bytes=6),
        sample(T0 + 60, 0.9, power_watts=500.0),
    ])  # fmt: skip
    first, second = series.points("GPU-a", T0, T0 + 120) or []
    assert (first.start, first.samples) == (T0, 3)
    assert first.sm_activity == pytest.approx(0.3)  # (0.2 + 0.4) / 2: None is not 0
    assert first.power_watts == pytest.approx(150.0)
    assert (first.memory_used_bytes, first.memory_total_bytes) == (9, 80)
    assert (second.start, second.sm_activity, second.memory_used_bytes) == (T0 + 60, 0.9, None)


def test_only_the_retention_behind_the_newest_sample_is_kept() -> None:
    series = SeriesBuffer(resolution_seconds=60, retention_seconds=300)
    series.add(sample(T0 + 60 * i) for i in range(20))
    kept = series.points("GPU-a", 0, T0 + 10_000) or []
    assert [p.start for p in kept] == [T0 + 60 * i for i in range(15, 20)]


def test_late_samples_land_in_their_own_bucket_in_order() -> None:
    series = SeriesBuffer(resolution_seconds=60, retention_seconds=3600)
    series.add([sample(T0 + 300, 1.0), sample(T0 + 0, 0.0), sample(T0 + 130, 0.5),
                sample(T0 + 10, 0.2)])  # fmt: skip
    points = series.points("GPU-a", 0, T0 + 3600) or []
    assert [(p.start, p.samples) for p in points] == [(T0, 2), (T0 + 120, 1), (T0 + 300, 1)]
    assert points[0].sm_activity == pytest.approx(0.1)


def test_a_window_selects_buckets_that_start_in_it_and_an_unknown_gpu_is_none() -> None:
    series = SeriesBuffer(resolution_seconds=60, retention_seconds=3600)
    series.add(sample(T0 + 60 * i) for i in range(10))
    assert [p.start for p in series.points("GPU-a", T0 + 120, T0 + 240) or []] == [
        T0 + 120, T0 + 180]  # fmt: skip
    assert series.points("GPU-b", 0, T0) is None
    assert series.gpu_uuids() == ["GPU-a"]


def test_bad_resolution_is_refused() -> None:
    with pytest.raises(ValueError, match="resolution"):
        SeriesBuffer(resolution_seconds=0)
    with pytest.raises(ValueError, match="resolution"):
        SeriesBuffer(resolution_seconds=600, retention_seconds=60)


def test_memory_per_gpu_is_fixed_whatever_the_samples() -> None:
    """Two GPUs at 1 Hz: the buffer holds as much after 2 h as after 10 min (a ring of
    retention / resolution slots), and less than 40 KB a GPU."""
    series = SeriesBuffer(resolution_seconds=60, retention_seconds=3600)

    def feed(seconds: range) -> int:
        for t in seconds:
            busy = sample(T0 + t, 0.5, power_watts=300.0, memory_used_bytes=t, gpu="a")
            quiet = sample(T0 + t, 0.1, power_watts=90.0, memory_used_bytes=t, gpu="b")
            series.add([busy, quiet])
        # only what the series module allocated and still holds: the process's other
        # threads (an xdist worker's channel) allocate meanwhile and are not the buffer
        held = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, series_module.__file__)]
        )
        return sum(stat.size for stat in held.statistics("filename"))

    tracemalloc.start()
    try:
        after_10_min = feed(range(0, 600))
        after_2_h = feed(range(600, 7200))
    finally:
        tracemalloc.stop()
    assert after_2_h <= after_10_min + 1_000  # no growth beyond noise
    assert after_2_h < 2 * 40_000
    (newest,) = series.points("GPU-a", T0 + 7140, T0 + 7200) or []
    assert (newest.samples, newest.memory_used_bytes) == (60, 7199)
