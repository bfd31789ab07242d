"""A tracked GPU's health facts: the newest sample's in event time (an older one arriving
late changes nothing), one object kept while no fact moves, none for a GPU that says none;
XIDs by code, each with its last sighting, forgotten past the window."""

from __future__ import annotations

from agent.model import GpuInfo, GpuSample
from collector.fleet.health import XID_RECENT_SECONDS
from collector.fleet.rules import FleetRules
from collector.fleet.state import TrackedGpu
from collector.records import HealthProblem, XidSeen

T0 = 1_767_225_600.0
RULES = FleetRules(idle_threshold=0.01, stale_after_seconds=30.0, reorder_window_seconds=20.0)
INFO = GpuInfo(uuid="GPU-h", index=0, name="NVIDIA H100 80GB HBM3")


def sample(t: float, **fields: object) -> GpuSample:
    return GpuSample(timestamp=T0 + t, gpu_uuid=INFO.uuid, sm_activity=0.5, **fields)  # type: ignore[arg-type]


def test_an_older_sample_arriving_late_leaves_the_newest_facts() -> None:
    gpu = TrackedGpu(info=INFO, node="n", model="H100")
    gpu.buffer_all([sample(10, temperature_celsius=90.0), sample(20, temperature_celsius=50.0)])
    gpu.buffer_all([sample(15, temperature_celsius=99.0, throttle_reasons=0x40)])
    assert gpu.health is not None and gpu.health.temperature_celsius == 50.0
    assert gpu.view(T0 + 20, RULES).problems == ()
    kept = gpu.health
    gpu.buffer_all([sample(25, temperature_celsius=50.0)])
    assert gpu.health is kept  # nothing moved: the same object
    gpu.buffer_all([sample(30, temperature_celsius=86.0, throttle_reasons=0x8)])
    assert gpu.health.problems == (HealthProblem.THROTTLED, HealthProblem.HOT)
    assert gpu.health.throttled_by == ("hw_slowdown",)


def test_a_gpu_that_says_no_health_fact_has_none() -> None:
    gpu = TrackedGpu(info=INFO, node="n", model="H100")
    gpu.buffer_all([sample(t) for t in (0, 10)])
    assert gpu.health is None and gpu.xids is None
    view = gpu.view(T0 + 10, RULES)
    assert view.health is None and view.recent_xids == () and view.problems == ()


def test_xids_keep_each_codes_last_sighting_and_age_out() -> None:
    gpu = TrackedGpu(info=INFO, node="n", model="H100")
    gpu.buffer_all([sample(0, xid_errors=(48,)), sample(10, xid_errors=(48, 63))])
    # the node's clock is 5 s ahead of the collector's: times move back by 5 s
    view = gpu.view(T0 + 5, RULES, offset_seconds=5.0)
    assert view.recent_xids == (XidSeen(63, T0 + 5), XidSeen(48, T0 + 5))
    assert view.problems == (HealthProblem.XID,)
    later = T0 + 10 + XID_RECENT_SECONDS + 1
    assert gpu.view(later, RULES).recent_xids == ()
    gpu.buffer_all([sample(later - T0, xid_errors=(79,))])
    assert gpu.xids == {79: later}  # the aged codes are forgotten, not only hidden
    assert gpu.view(later, RULES).problems == (HealthProblem.FELL_OFF_BUS,)
