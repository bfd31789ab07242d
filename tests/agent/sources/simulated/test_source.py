"""The simulator against its own ground truth, and the ground truth against first principles."""

from __future__ import annotations

import itertools

import pytest

from agent.config import SourceSettings
from agent.model import WorkloadKind
from agent.sources.simulated.hardware import GPU_MODELS
from agent.sources.simulated.mig import EXAMPLE_LAYOUTS
from agent.sources.simulated.source import (
    DEFAULT_START_TIME,
    SEGMENT_SECONDS,
    ActivityKind,
    SimJob,
    SimulatedFleet,
    SimulatedNode,
    build_fleet,
)
from gpufleet.settings import ConfigError

T0 = DEFAULT_START_TIME
HOUR = 3600.0


@pytest.fixture(scope="module")
def fleet() -> SimulatedFleet:
    return build_fleet()


def test_default_fleet_holds_every_workload_kind(fleet: SimulatedFleet) -> None:
    jobs = fleet.jobs
    kinds = [job.kind for job in jobs]
    assert kinds.count(ActivityKind.STUCK) >= 2
    assert kinds.count(ActivityKind.TRAINING) >= 3
    assert ActivityKind.NOTEBOOK in kinds and ActivityKind.INFERENCE in kinds
    assert ActivityKind.DATALOADER_BOUND in kinds
    assert len(fleet.gpus_held_by(None, T0)) >= 2
    assert any(len(job.gpu_indexes) > 1 for job in jobs if job.kind is ActivityKind.TRAINING)
    workload_kinds = {job.workload.kind for job in jobs}
    assert workload_kinds == {WorkloadKind.KUBERNETES_POD, WorkloadKind.SLURM_JOB}
    for job in jobs:
        w = job.workload
        if w.kind is WorkloadKind.KUBERNETES_POD:
            assert w.namespace and w.name and w.container and w.team and w.id
        else:
            assert w.slurm_job_id == w.id and w.user
    assert len({job.workload.key for job in jobs}) == len(jobs)


def test_gpu_identities_are_deterministic_and_unique(fleet: SimulatedFleet) -> None:
    again = build_fleet()
    for node, twin in zip(fleet.nodes, again.nodes, strict=True):
        assert node.discover() == twin.discover()
        assert [g.index for g in node.discover()] == list(range(8))
    uuids = [g.uuid for node in fleet.nodes for g in node.discover()]
    assert len(set(uuids)) == 32 and all(u.startswith("GPU-") for u in uuids)
    other = build_fleet(seed=1)
    assert not set(uuids) & {g.uuid for n in other.nodes for g in n.discover()}


def test_same_seed_same_samples_in_any_read_order() -> None:
    times = [T0 + 7.3, T0 + 5000.0, T0 + 2.0, T0 + 21000.5, T0 - 30.0]
    forward = build_fleet(seed=3)
    scrambled = build_fleet(seed=3)
    expected = [forward.read(t) for t in times]
    got = [scrambled.read(t) for t in reversed(times)][::-1]
    assert got == expected
    assert build_fleet(seed=4).read(times[1]) != expected[1]


def test_counter_deltas_equal_true_energy(fleet: SimulatedFleet) -> None:
    node = fleet.nodes[1]
    times = [T0 + 0.5 + 997.3 * k for k in range(12)]
    readings = [node.read(t) for t in times]
    for i, gpu in enumerate(node.discover()):
        for (ta, a), (tb, b) in itertools.pairwise(zip(times, readings, strict=True)):
            assert a[i].energy_joules is not None and b[i].energy_joules is not None
            delta = b[i].energy_joules - a[i].energy_joules
            assert delta == pytest.approx(node.true_energy_joules(gpu.uuid, ta, tb), abs=1e-6)


def test_true_energy_is_the_sum_of_segment_powers(fleet: SimulatedFleet) -> None:
    """First principles: sum of (power x seconds) over the grid, partial segments included."""
    gpu = fleet.nodes[0].gpus[0]
    t0, t1 = T0 + 12.5, T0 + 12.5 + 40 * SEGMENT_SECONDS + 1.25
    first, last = gpu.segment_at(t0), gpu.segment_at(t1)
    expected = sum(gpu.power_watts(s) * SEGMENT_SECONDS for s in range(first, last))
    expected -= gpu.power_watts(first) * (t0 - gpu.segment_start(first))
    expected += gpu.power_watts(last) * (t1 - gpu.segment_start(last))
    assert fleet.true_energy_joules(gpu.info.uuid, t0, t1) == pytest.approx(expected, rel=1e-12)


def test_power_stays_between_idle_floor_and_tdp(fleet: SimulatedFleet) -> None:
    for node in fleet.nodes:
        for t in range(0, 7200, 13):
            for gpu, sample in zip(node.gpus, node.read(T0 + t), strict=True):
                assert sample.power_watts is not None
                assert gpu.model.bare_idle_watts * 0.92 <= sample.power_watts
                assert sample.power_watts <= gpu.model.tdp_watts


def test_workload_energy_plus_free_energy_sums_to_gpu_energy(fleet: SimulatedFleet) -> None:
    t0, t1 = T0 + 100.0, T0 + 6 * HOUR
    total_gpu = sum(fleet.true_energy_joules(u, t0, t1) for u in fleet.gpu_uuids)
    total_workloads = sum(fleet.true_workload_energy_joules(j.workload.key, t0, t1)
                          for j in fleet.jobs)  # fmt: skip
    free = 0.0
    for uuid in fleet.gpu_uuids:
        for a, b in _free_spans(tuple(fleet.gpu(uuid).jobs), t0, t1):
            free += fleet.true_energy_joules(uuid, a, b)
    assert total_workloads + free == pytest.approx(total_gpu, rel=1e-12)
    assert free > 0.0


def _free_spans(jobs: tuple[SimJob, ...], t0: float, t1: float) -> list[tuple[float, float]]:
    """[t0, t1] minus the spans the jobs hold the GPU (jobs on one GPU never overlap)."""
    held = sorted(
        (t0 if j.start_time is None else max(t0, j.start_time),
         t1 if j.end_time is None else min(t1, j.end_time))
        for j in jobs
    )  # fmt: skip
    free, cursor = [], t0
    for a, b in held:
        if a > cursor:
            free.append((cursor, a))
        cursor = max(cursor, b)
    if cursor < t1:
        free.append((cursor, t1))
    return free


def test_idle_intervals_agree_with_sampled_activity(fleet: SimulatedFleet) -> None:
    t0, t1 = T0, T0 + 2 * HOUR
    for node in fleet.nodes:
        intervals = {g.uuid: fleet.true_idle_intervals(g.uuid, t0, t1) for g in node.discover()}
        for t in range(0, int(t1 - t0), 7):
            for sample in node.read(t0 + t):
                idle = (sample.sm_activity or 0.0) < 0.01 and (sample.dram_activity or 0.0) < 0.01
                inside = any(a <= t0 + t < b for a, b in intervals[sample.gpu_uuid])
                assert idle == inside, (sample.gpu_uuid, t)


def test_stuck_jobs_are_idle_all_along_at_context_power(fleet: SimulatedFleet) -> None:
    stuck = fleet.gpus_held_by(ActivityKind.STUCK, T0)
    assert len(stuck) >= 2
    for uuid in stuck:
        assert fleet.true_idle_intervals(uuid, T0, T0 + 6 * HOUR) == [(T0, T0 + 6 * HOUR)]
        gpu = fleet.gpu(uuid)
        sample = fleet.node_of(uuid).read(T0 + 4321.0)[gpu.info.index]
        assert sample.sm_activity == 0.0 and sample.dram_activity == 0.0
        assert sample.power_watts == pytest.approx(
            gpu.model.context_idle_watts * gpu.gain, abs=1e-3
        )
        assert sample.memory_used_bytes and sample.processes and sample.workloads


def test_free_gpus_draw_bare_idle_power_and_hold_nothing(fleet: SimulatedFleet) -> None:
    for uuid in fleet.gpus_held_by(None, T0):
        gpu = fleet.gpu(uuid)
        sample = fleet.node_of(uuid).read(T0 + 99.0)[gpu.info.index]
        assert sample.power_watts == pytest.approx(gpu.model.bare_idle_watts * gpu.gain, abs=1e-3)
        assert sample.workloads == () and sample.processes == () and sample.memory_used_bytes == 0


def test_training_is_never_idle_and_notebooks_idle_for_long_stretches(
    fleet: SimulatedFleet,
) -> None:
    t1 = T0 + 6 * HOUR
    for uuid in fleet.gpus_held_by(ActivityKind.TRAINING, T0):
        assert fleet.true_idle_seconds(uuid, T0, t1) == 0.0
    for uuid in fleet.gpus_held_by(ActivityKind.NOTEBOOK, T0):
        idle = fleet.true_idle_intervals(uuid, T0, t1)
        longest = max(b - a for a, b in idle)
        assert longest >= 20 * 60.0
        assert 0.8 < sum(b - a for a, b in idle) / (t1 - T0) < 1.0  # mostly idle, some bursts


def test_dataloader_bound_saws_between_20_and_40_percent(fleet: SimulatedFleet) -> None:
    for uuid in fleet.gpus_held_by(ActivityKind.DATALOADER_BOUND, T0):
        values = [fleet.true_activity(uuid, T0 + t)[0] for t in range(0, 600, 5)]
        assert min(values) >= 0.2 and max(values) <= 0.4
        assert max(values) - min(values) > 0.15


def test_inference_follows_a_daily_cycle(fleet: SimulatedFleet) -> None:
    for uuid in fleet.gpus_held_by(ActivityKind.INFERENCE, T0):
        hourly = [
            sum(fleet.true_activity(uuid, T0 + h * HOUR + s)[0] for s in range(0, 3600, 5)) / 720
            for h in range(24)
        ]
        assert max(hourly) > 2.0 * min(hourly) and min(hourly) > 0.0


def test_a_job_that_ends_frees_its_gpu(fleet: SimulatedFleet) -> None:
    ending = [job for job in fleet.jobs if job.end_time is not None]
    assert ending
    job = ending[0]
    assert job.end_time is not None
    node = next(n for n in fleet.nodes if n.name == job.node)
    index = job.gpu_indexes[0]
    uuid = node.gpus[index].info.uuid
    assert fleet.holder(uuid, job.end_time - 1.0) == job.workload
    assert fleet.holder(uuid, job.end_time) is None
    after = node.read(job.end_time + 10.0)[index]
    assert after.workloads == () and after.sm_activity == 0.0
    energy = fleet.true_workload_energy_joules(job.workload.key, T0, T0 + 6 * HOUR)
    assert energy == pytest.approx(fleet.true_energy_joules(uuid, T0, job.end_time), rel=1e-12)


def test_gpm_models_report_fine_activity_others_coarse(fleet: SimulatedFleet) -> None:
    h100 = fleet.nodes[0].read(T0 + 50.0)[0]
    a100 = fleet.nodes[1].read(T0 + 50.0)[2]
    assert not h100.activity_coarse and h100.sm_occupancy is not None
    assert a100.activity_coarse and a100.sm_occupancy is None and a100.tensor_activity is None
    assert a100.sm_activity is not None and round(a100.sm_activity * 100, 9) % 1 == 0


def test_samples_carry_workloads_and_processes(fleet: SimulatedFleet) -> None:
    node = fleet.nodes[0]
    samples = node.read(T0 + 10.0)
    training = samples[:4]
    assert all(s.workloads == training[0].workloads for s in training)
    for s in training:
        (proc,) = s.processes
        assert proc.workload == s.workloads[0] and proc.used_memory_bytes == s.memory_used_bytes
        assert proc.sm_share is not None and 0.0 < proc.sm_share <= 1.0


def test_from_settings_cycles_models_and_rejects_unknown_ones() -> None:
    settings = SourceSettings(kind="simulated", simulated_gpus=4,
                              simulated_models=["H100", "L4"], simulated_seed=9)  # fmt: skip
    node = SimulatedNode.from_settings("n1", settings, start_time=T0)
    names = [g.name for g in node.discover()]
    assert names == [GPU_MODELS[k].name for k in ("H100", "L4", "H100", "L4")]
    assert node.read(T0 + 1.0) == SimulatedNode.from_settings("n1", settings, T0).read(T0 + 1.0)
    bad = SourceSettings(kind="simulated", simulated_models=["V100"])
    with pytest.raises(ConfigError, match="simulated_models"):
        SimulatedNode.from_settings("n1", bad)


def test_one_hour_at_1hz_trapezoid_within_half_percent_counter_exact() -> None:
    """Issue 2's Must show: an 8-GPU node for one simulated hour."""
    node = SimulatedNode.build("n8", ["H100"] * 8, seed=5, start_time=T0)
    readings = [node.read(T0 + s) for s in range(3601)]
    for i, info in enumerate(node.discover()):
        truth = node.true_energy_joules(info.uuid, T0, T0 + HOUR)
        powers = [r[i].power_watts or 0.0 for r in readings]
        trapezoid = sum((a + b) / 2.0 for a, b in itertools.pairwise(powers))
        assert trapezoid == pytest.approx(truth, rel=0.005)
        first, last = readings[0][i].energy_joules, readings[-1][i].energy_joules
        assert first is not None and last is not None
        assert last - first == pytest.approx(truth, abs=1e-6)


def test_video_engines_idle_on_whole_gpus_unknown_under_mig(fleet: SimulatedFleet) -> None:
    # the simulated jobs train and serve models: no video; NVML has none in MIG mode
    whole = [s for node in fleet.nodes for s in node.read(T0 + 10.0)]
    assert whole and all((s.encoder_activity, s.decoder_activity) == (0.0, 0.0) for s in whole)
    mig = SimulatedNode.build_mig("mig-node", EXAMPLE_LAYOUTS).read(T0 + 10.0)
    assert len(mig) == 9
    assert all((s.encoder_activity, s.decoder_activity) == (None, None) for s in mig)
