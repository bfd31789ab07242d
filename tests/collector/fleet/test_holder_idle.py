"""A shared GPU's holders idle on their own, in the live view: TrackedGpu on hand-made samples."""

from __future__ import annotations

from agent.model import GpuSample, ProcessSample, Workload
from collector.fleet.state import TrackedGpu
from collector.records import GpuState
from tests.collector.fleet.test_state import INFO, POD_A, POD_B, RULES, T0, new_gpu


def shared(
    t: float, a: float, b: float, holders: tuple[Workload, ...] = (POD_A, POD_B)
) -> GpuSample:
    """POD_A and POD_B time-slicing the GPU, with SM shares ``a`` and ``b``."""
    procs = tuple(
        ProcessSample(pid=pid, sm_share=share, used_memory_bytes=1 << 30, workload=w)
        for pid, share, w in ((1, a, POD_A), (2, b, POD_B))
        if w in holders
    )
    return GpuSample(timestamp=T0 + t, gpu_uuid=INFO.uuid, sm_activity=a + b, dram_activity=a + b,
                     power_watts=300.0, energy_joules=300.0 * t, workloads=holders,
                     processes=procs)  # fmt: skip


def run(gpu: TrackedGpu, samples: list[GpuSample], flush: bool = True) -> None:
    for s in samples:
        assert gpu.buffer(s, RULES)
    gpu.apply_ready(RULES, flush=flush)


def test_a_holder_idle_beside_a_busy_one_has_its_own_idle_run() -> None:
    gpu = new_gpu()
    run(gpu, [shared(t, 0.6, 0.0 if t >= 20 else 0.3) for t in range(0, 100, 10)])
    view = gpu.view(T0 + 95, RULES)
    assert view.state is GpuState.ACTIVE
    assert view.holders_idle_since == {POD_B.key: T0 + 20}
    assert view.holder_fractions == {POD_A.key: 0.5, POD_B.key: 0.5}


def test_a_buffered_reading_where_it_works_again_ends_its_run_at_once() -> None:
    gpu = new_gpu()
    run(gpu, [shared(t, 0.6, 0.0) for t in range(0, 100, 10)])
    assert gpu.view(T0 + 95, RULES).holders_idle_since == {POD_B.key: T0}
    run(gpu, [shared(100, 0.6, 0.4)], flush=False)  # inside the reorder window: not applied
    assert gpu.buffered == 1
    assert gpu.view(T0 + 101, RULES).holders_idle_since == {}


def test_a_gap_or_leaving_the_gpu_ends_a_holders_run() -> None:
    gpu = new_gpu()
    run(gpu, [shared(t, 0.6, 0.0) for t in range(0, 50, 10)])
    run(gpu, [shared(t, 0.6, 0.0) for t in range(200, 250, 10)])  # 160 s gap: past stale
    assert gpu.view(T0 + 245, RULES).holders_idle_since == {POD_B.key: T0 + 200}
    run(gpu, [shared(t, 0.6, 0.0, holders=(POD_A,)) for t in range(250, 300, 10)])
    view = gpu.view(T0 + 295, RULES)
    assert view.holders_idle_since == {} and view.holder_fractions == {}
