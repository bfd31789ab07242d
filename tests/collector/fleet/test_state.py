"""TrackedGpu: event-time order, intervals, idle episodes and the view, on hand-made samples."""

from __future__ import annotations

from agent.model import GpuInfo, GpuSample, Workload, WorkloadKind
from collector.fleet.rules import FleetRules
from collector.fleet.state import Applied, TrackedGpu
from collector.records import Activity, GpuState

T0 = 1_767_225_600.0
RULES = FleetRules(idle_threshold=0.01, stale_after_seconds=30.0, reorder_window_seconds=20.0)
INFO = GpuInfo(uuid="GPU-a", index=0, name="NVIDIA H100 80GB HBM3")
POD_A = Workload(kind=WorkloadKind.KUBERNETES_POD, id="a", name="a", namespace="ml")
POD_B = Workload(kind=WorkloadKind.KUBERNETES_POD, id="b", name="b", namespace="ml")


def sample(t: float, sm: float = 0.0, joules: float | None = None,
           holders: tuple[Workload, ...] = ()) -> GpuSample:  # fmt: skip
    """A reading at T0 + t; the energy counter defaults to 100 W since T0."""
    return GpuSample(
        timestamp=T0 + t, gpu_uuid=INFO.uuid, sm_activity=sm, dram_activity=sm,
        power_watts=100.0, energy_joules=100.0 * t if joules is None else joules,
        workloads=holders,
    )  # fmt: skip


def feed(gpu: TrackedGpu, samples: list[GpuSample], flush: bool = True) -> Applied:
    for s in samples:
        assert gpu.buffer(s)
    return gpu.apply_ready(RULES, flush=flush)


def new_gpu() -> TrackedGpu:
    return TrackedGpu(info=INFO, node="n", model="H100")


def test_out_of_order_samples_inside_the_window_apply_in_event_time_order() -> None:
    gpu = new_gpu()
    applied = feed(gpu, [sample(t) for t in (0, 20, 10, 40, 30)], flush=False)
    # newest is 40, the window 20 s: 0, 10, 20 are ready; 30 and 40 wait
    assert [s.timestamp - T0 for s in applied.samples] == [0, 10, 20]
    assert [(i.start - T0, i.end - T0) for i in applied.intervals] == [(0, 10), (10, 20)]
    assert gpu.buffered == 2
    rest = gpu.apply_ready(RULES, flush=True)
    assert [(i.start - T0, i.end - T0) for i in rest.intervals] == [(20, 30), (30, 40)]


def test_a_sample_behind_applied_time_is_refused_and_a_duplicate_is_counted_late() -> None:
    gpu = new_gpu()
    feed(gpu, [sample(0), sample(10)])
    assert not gpu.buffer(sample(5))
    assert not gpu.buffer(sample(10))
    applied = feed(gpu, [sample(20), sample(20)])
    assert applied.late == 1 and len(applied.intervals) == 1


def test_interval_energy_is_the_counter_delta_attributed_to_the_earlier_sample() -> None:
    gpu = new_gpu()
    applied = feed(gpu, [sample(0, 0.5, holders=(POD_A,)), sample(10, 0.5)])
    (interval,) = applied.intervals
    assert interval.energy_joules == 1000.0 and not interval.energy_estimated
    assert interval.activity is Activity.ACTIVE
    assert [ref.key for ref in interval.shares] == [POD_A.key]


def test_an_idle_episode_runs_from_the_first_idle_sample_to_the_first_active_one() -> None:
    gpu = new_gpu()
    applied = feed(gpu, [sample(0, 0.5), sample(10), sample(20), sample(30, 0.5)])
    (episode,) = applied.episodes_closed
    assert (episode.start - T0, episode.end) == (10, T0 + 30)
    assert gpu.episode_start is None


def test_a_stale_gap_is_unknown_and_ends_the_episode_at_the_last_idle_sample() -> None:
    gpu = new_gpu()
    applied = feed(gpu, [sample(0), sample(10), sample(100), sample(110, 0.5)])
    assert [i.activity for i in applied.intervals] == [
        Activity.IDLE, Activity.UNKNOWN, Activity.IDLE,
    ]  # fmt: skip
    assert [(e.start - T0, (e.end or 0) - T0) for e in applied.episodes_closed] == [
        (0, 10), (100, 110),
    ]  # fmt: skip


def test_a_new_holder_starts_a_new_episode_even_if_the_gpu_stays_idle() -> None:
    """A pod scheduled onto a GPU that sat idle for an hour has been idle for 0 s, not 1 h:
    the GPU's idle time before it arrived is unallocated, not the pod's."""
    gpu = new_gpu()
    free = [sample(t) for t in range(0, 3600, 10)]
    pod_a = [sample(t, holders=(POD_A,)) for t in range(3600, 5400, 10)]
    pod_b = [sample(t, holders=(POD_B,)) for t in range(5400, 5500, 10)]
    applied = feed(gpu, [*free, *pod_a, *pod_b])
    closed = [(e.start - T0, (e.end or 0) - T0, e.workload_key) for e in applied.episodes_closed]
    assert closed == [(0, 3600, None), (3600, 5400, POD_A.key)]
    assert (gpu.episode_start, gpu.episode_workload) == (T0 + 5400, POD_B.key)
    view = gpu.view(T0 + 5490, RULES)
    assert view.state is GpuState.ALLOCATED_IDLE and view.idle_since == T0 + 5400


def test_the_view_is_unknown_once_the_newest_sample_is_stale() -> None:
    gpu = new_gpu()
    feed(gpu, [sample(0, holders=(POD_A,)), sample(10, holders=(POD_A,))])
    fresh = gpu.view(T0 + 40, RULES)
    assert fresh.state is GpuState.ALLOCATED_IDLE and fresh.idle_since == T0
    assert gpu.view(T0 + 41, RULES).state is GpuState.UNKNOWN
    assert gpu.view(T0 + 41, RULES).idle_since is None


def held(ts: range, sm: float = 0.0) -> list[GpuSample]:
    return [sample(t, sm=sm, holders=(POD_A,)) for t in ts]


def test_a_burst_still_in_the_reorder_buffer_restarts_the_idle_run() -> None:
    """Idle 0..1800 s is applied; a 10 s burst and 20 s of idle after it are still buffered:
    the GPU has been idle for 20 s, not 30 min (the burst would otherwise be seen only a
    window later, and a release could open early)."""
    gpu = new_gpu()
    feed(gpu, held(range(0, 1810, 10)))
    assert gpu.episode_start == T0
    for s in [*held(range(1810, 1820, 10), sm=0.9), *held(range(1820, 1850, 10))]:
        assert gpu.buffer(s)
    view = gpu.view(T0 + 1840, RULES)
    assert view.state is GpuState.ALLOCATED_IDLE and view.idle_since == T0 + 1820
    gpu.apply_ready(RULES, flush=True)  # once applied, the episode says the same
    assert gpu.view(T0 + 1840, RULES).idle_since == gpu.episode_start == T0 + 1820


def test_buffered_idle_readings_continuing_the_open_episode_keep_its_start() -> None:
    gpu = new_gpu()
    feed(gpu, held(range(0, 600, 10)))
    for s in held(range(600, 640, 10)):
        assert gpu.buffer(s)
    assert gpu.view(T0 + 630, RULES).idle_since == T0


def test_idle_readings_only_in_the_buffer_give_the_run_start_and_a_gap_restarts_it() -> None:
    gpu = new_gpu()
    feed(gpu, held(range(0, 100, 10), sm=0.9))  # active, applied: no episode
    for s in held(range(100, 130, 10)):
        assert gpu.buffer(s)
    assert gpu.view(T0 + 120, RULES).idle_since == T0 + 100
    for s in held(range(200, 220, 10)):  # 80 s without a sample (stale after 30 s)
        assert gpu.buffer(s)
    assert gpu.view(T0 + 210, RULES).idle_since == T0 + 200
    holder_b = sample(220, holders=(POD_B,))
    assert gpu.buffer(holder_b)
    assert gpu.view(T0 + 220, RULES).idle_since == T0 + 220  # a new holder: a new run


def test_a_counter_reset_falls_back_to_power_and_is_marked_estimated() -> None:
    gpu = new_gpu()
    applied = feed(gpu, [sample(0, joules=5000.0), sample(10, joules=20.0)])
    (interval,) = applied.intervals
    assert interval.energy_joules == 1000.0 and interval.energy_estimated


def test_buffered_readings_share_one_holders_object_until_the_holders_change() -> None:
    gpu = new_gpu()
    for t in (0, 10, 20):
        gpu.buffer(sample(t, holders=(POD_A,)))
    gpu.buffer(sample(30, holders=(POD_B,)))
    applied = gpu.apply_ready(RULES, flush=True)
    holders = [r.holders for r in applied.samples]
    assert holders[0] is holders[1] is holders[2] and holders[3] is not holders[0]
    assert [h.key for h in holders] == [POD_A.key] * 3 + [POD_B.key]
    assert applied.intervals[0].shares is applied.intervals[1].shares


def test_a_reading_round_trips_through_the_cursor_sample() -> None:
    gpu = new_gpu()
    original = sample(0, 0.5, holders=(POD_A, POD_B))
    reading = gpu.reading(original)
    again = gpu.reading(reading.to_sample(INFO.uuid))
    assert again == reading
    assert (
        again.holders.shares == reading.holders.shares == {ref: 0.5 for ref in reading.holders.refs}
    )


def test_a_reading_is_reclassified_once_the_gpu_turns_out_to_report_dram() -> None:
    """Without DRAM readings idle is decided on SM alone; once one arrives, a low-SM reading
    with no DRAM value cannot say, even for the interval it starts after it was applied."""
    gpu = new_gpu()
    no_dram = GpuSample(timestamp=T0, gpu_uuid=INFO.uuid, sm_activity=0.0, energy_joules=0.0)
    feed(gpu, [no_dram])
    assert gpu.episode_start == T0  # idle on SM alone
    (interval,) = feed(gpu, [sample(10)]).intervals
    assert interval.activity is Activity.UNKNOWN
