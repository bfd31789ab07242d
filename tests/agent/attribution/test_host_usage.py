"""Per-workload host CPU and memory from fixture cgroup trees (agent/attribution/host_usage.py).

Each test writes a cgroup filesystem and a /proc under tmp_path the way the kernel lays
them out, reads twice a known (fake monotonic) interval apart, and checks the exact cores,
ratios and bytes the files imply.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from agent.attribution.host_usage import CgroupHostReader
from agent.attribution.proc import ProcReader
from agent.model import GpuSample, ProcessSample, Workload, WorkloadKind
from agent.stats import AgentStats

UID = "2c9f8a79-5391-454b-88cb-86190881cb96"
POD_SLICE = (
    f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice"
)
CONTAINER = POD_SLICE + "/cri-containerd-" + "3f" * 32 + ".scope"
POD = Workload(kind=WorkloadKind.KUBERNETES_POD, id=UID, name="trainer-0", namespace="ml")
JOB = Workload(kind=WorkloadKind.SLURM_JOB, id="4343", slurm_job_id="4343")
JOB_CGROUP = "/system.slice/slurmstepd.scope/job_4343"
NOW = 1_767_225_600.0
GIB = 2**30


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def write_v2(
    root: Path,
    path: str,
    usage_usec: int,
    periods: int = 0,
    throttled: int = 0,
    cpu_max: str = "max 100000",
    pressure: str | None = "some avg10=1.25 avg60=0.50 avg300=0.10 total=123456",
    current: int = 3 * GIB,
    memory_max: str = "max",
) -> None:
    d = root / path.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    (d / "cpu.stat").write_text(
        f"usage_usec {usage_usec}\nuser_usec {usage_usec // 2}\nsystem_usec 0\n"
        f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec 0\n"
    )
    (d / "cpu.max").write_text(cpu_max + "\n")
    if pressure is not None:
        (d / "memory.pressure").write_text(pressure + "\nfull avg10=0.00 avg60=0.00 total=0\n")
    (d / "memory.current").write_text(f"{current}\n")
    (d / "memory.max").write_text(memory_max + "\n")


def write_proc(proc: Path, pid: int, cgroup: str) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup").write_text(cgroup)
    (d / "environ").write_bytes(b"")
    (d / "status").write_text("Uid:\t0\t0\t0\t0\n")
    (d / "comm").write_text("python\n")


def sample(uuid: str, holder: Workload, *pids: int) -> GpuSample:
    processes = tuple(ProcessSample(pid=pid, workload=holder) for pid in pids)
    return GpuSample(timestamp=NOW, gpu_uuid=uuid, processes=processes, workloads=(holder,))


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    cgroup, proc = tmp_path / "cgroup", tmp_path / "proc"
    cgroup.mkdir()
    proc.mkdir()
    (cgroup / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    return cgroup, proc


def reader(
    cgroup: Path, proc: Path, clock: Clock, stats: AgentStats | None = None
) -> CgroupHostReader:
    procs = ProcReader(proc, 5.0, clock)
    return CgroupHostReader(procs, cgroup, stats, refresh_seconds=5.0, monotonic=clock)


def test_v2_pod_with_a_limit_exact_cores_throttling_and_pressure(tree: tuple[Path, Path]) -> None:
    cgroup, proc = tree
    clock = Clock()
    write_proc(proc, 1001, f"0::{CONTAINER}\n")
    write_v2(cgroup, POD_SLICE, 10_000_000, 100, 10, "400000 100000", current=12 * GIB,
             memory_max=str(64 * GIB))  # fmt: skip
    # the container's own cgroup is not the pod's: its figures must not be the ones read
    write_v2(cgroup, CONTAINER, 1, cpu_max="100000 100000")
    hosts = reader(cgroup, proc, clock)
    samples = [sample("GPU-0", POD, 1001), sample("GPU-1", POD, 1001)]

    (first,) = hosts.read_hosts(samples, NOW)
    assert first.workload_key == "pod:ml/trainer-0"
    assert first.cpu_used_cores is None and first.cpu_throttled_ratio is None  # one reading
    assert first.cpu_limit_cores == 4.0
    assert first.memory_pressure_ratio == pytest.approx(0.0125)
    assert (first.memory_used_bytes, first.memory_limit_bytes) == (12 * GIB, 64 * GIB)

    clock.now += 2.0
    write_v2(cgroup, POD_SLICE, 17_000_000, 120, 15, "400000 100000")
    (second,) = hosts.read_hosts(samples, NOW + 2)  # two GPUs, one workload: one sample
    assert second.cpu_used_cores == pytest.approx(3.5)  # 7 s of CPU in 2 s
    assert second.cpu_throttled_ratio == pytest.approx(0.25)  # 5 of 20 periods
    assert second.timestamp == NOW + 2


def test_v2_slurm_job_unlimited(tree: tuple[Path, Path]) -> None:
    cgroup, proc = tree
    clock = Clock()
    write_proc(proc, 2002, f"0::{JOB_CGROUP}/step_batch/user/task_0\n")
    write_v2(cgroup, JOB_CGROUP, 1_000_000, pressure=None)
    hosts = reader(cgroup, proc, clock)
    hosts.read_hosts([sample("GPU-0", JOB, 2002)], NOW)
    clock.now += 4.0
    write_v2(cgroup, JOB_CGROUP, 25_000_000, pressure=None)
    (host,) = hosts.read_hosts([sample("GPU-0", JOB, 2002)], NOW + 4)
    assert host.cpu_used_cores == pytest.approx(6.0)
    assert host.cpu_limit_cores is None and host.memory_limit_bytes is None
    assert host.cpu_throttled_ratio is None  # no quota, no periods: nothing to say
    assert host.memory_pressure_ratio is None  # no PSI on this kernel


def test_v1_fallback(tmp_path: Path) -> None:
    cgroup, proc = tmp_path / "cgroup", tmp_path / "proc"
    path = "/slurm/uid_4001000/job_4242"
    cpu, memory = cgroup / "cpu,cpuacct" / path.lstrip("/"), cgroup / "memory" / path.lstrip("/")
    for d in (cpu, memory):
        d.mkdir(parents=True)
    (cgroup / "cpuset").mkdir()
    write_proc(proc, 2001, "".join(
        f"{i}:{c}:{path}/step_0/task_0\n" for i, c in ((4, "memory"), (3, "cpu,cpuacct"))
    ) + "1:name=systemd:/system.slice/slurmd.service\n")  # fmt: skip
    (cpu / "cpu.cfs_quota_us").write_text("200000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (memory / "memory.usage_in_bytes").write_text(f"{5 * GIB}\n")
    (memory / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # unlimited
    job = Workload(kind=WorkloadKind.SLURM_JOB, id="4242", slurm_job_id="4242")
    clock = Clock()
    hosts = reader(cgroup, proc, clock)
    for usage_ns, periods, throttled in ((3 * 10**9, 50, 0), (5 * 10**9, 60, 8)):
        (cpu / "cpuacct.usage").write_text(f"{usage_ns}\n")
        (cpu / "cpu.stat").write_text(f"nr_periods {periods}\nnr_throttled {throttled}\n")
        (host,) = hosts.read_hosts([sample("GPU-0", job, 2001)], NOW)
        clock.now += 0.5
    assert host.cpu_used_cores == pytest.approx(4.0)  # 2 s of CPU in 0.5 s
    assert host.cpu_limit_cores == 2.0 and host.cpu_throttled_ratio == pytest.approx(0.8)
    assert (host.memory_used_bytes, host.memory_limit_bytes) == (5 * GIB, None)
    assert host.memory_pressure_ratio is None


def test_missing_cgroup_gives_no_sample_logged_once_and_counted(
    tree: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    cgroup, proc = tree
    clock, stats = Clock(), AgentStats()
    write_proc(proc, 1001, f"0::{CONTAINER}\n")  # its pod slice was never created
    other = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid-x", name="x", namespace="ml")
    hosts = reader(cgroup, proc, clock, stats)
    with caplog.at_level(logging.WARNING, logger="agent.attribution.host_usage"):
        for _ in range(3):
            found = hosts.read_hosts([sample("GPU-0", POD, 1001), sample("GPU-1", other)], NOW)
            assert found == []
            clock.now += 5.0  # past the refresh: looked for again, and counted again
    (warning,) = [r.getMessage() for r in caplog.records]  # two pods, three ticks: once
    assert "pod:ml/trainer-0" in warning and "attribution.cgroup_root" in warning
    errors = stats.snapshot().field_errors_total
    assert errors == {("GPU-0", "host_cgroup"): 3, ("GPU-1", "host_cgroup"): 3}


def test_counters_going_back_after_recreation_give_no_rate(tree: tuple[Path, Path]) -> None:
    cgroup, proc = tree
    clock = Clock()
    write_proc(proc, 2002, f"0::{JOB_CGROUP}/step_0\n")
    hosts = reader(cgroup, proc, clock)
    cores = []
    for usage in (50_000_000, 51_000_000, 2_000_000, 4_000_000):  # recreated before the 3rd
        write_v2(cgroup, JOB_CGROUP, usage)
        (host,) = hosts.read_hosts([sample("GPU-0", JOB, 2002)], NOW)
        cores.append(host.cpu_used_cores)
        clock.now += 1.0
    assert cores == [None, pytest.approx(1.0), None, pytest.approx(2.0)]


def test_a_vanished_cgroup_forgets_its_counters(tree: tuple[Path, Path]) -> None:
    cgroup, proc = tree
    clock = Clock()
    write_proc(proc, 2002, f"0::{JOB_CGROUP}/step_0\n")
    hosts = reader(cgroup, proc, clock)
    write_v2(cgroup, JOB_CGROUP, 1_000_000)
    hosts.read_hosts([sample("GPU-0", JOB, 2002)], NOW)
    shutil.rmtree(cgroup / JOB_CGROUP.lstrip("/"))
    clock.now += 1.0
    assert hosts.read_hosts([sample("GPU-0", JOB, 2002)], NOW) == []
    # the same path again, with larger counters: a new cgroup, so no rate across the gap
    write_v2(cgroup, JOB_CGROUP, 9_000_000)
    clock.now += 1.0
    (host,) = hosts.read_hosts([sample("GPU-0", JOB, 2002)], NOW)
    assert host.cpu_used_cores is None


def test_pod_without_processes_found_by_uid_and_private_namespace_paths(
    tree: tuple[Path, Path],
) -> None:
    cgroup, proc = tree
    clock = Clock()
    guaranteed = "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
    idle = Workload(kind=WorkloadKind.KUBERNETES_POD, id=guaranteed, name="idle", namespace="ml")
    write_v2(cgroup, f"/kubepods.slice/kubepods-pod{guaranteed.replace('-', '_')}.slice", 5)
    # seen from the agent's own cgroup namespace: relative to it
    write_proc(proc, 1006, f"0::/../../..{CONTAINER}\n")
    write_v2(cgroup, POD_SLICE, 7)
    hosts = reader(cgroup, proc, clock)
    found = hosts.read_hosts([sample("GPU-0", idle), sample("GPU-1", POD, 1006)], NOW)
    assert {h.workload_key for h in found} == {"pod:ml/idle", "pod:ml/trainer-0"}


def test_only_gpu_holders_and_bare_processes_in_their_own_cgroup(tree: tuple[Path, Path]) -> None:
    cgroup, proc = tree
    clock = Clock()
    service = "/system.slice/display-manager.service"
    write_proc(proc, 3001, f"0::{service}\n")
    write_v2(cgroup, service, 1_000_000)
    write_v2(cgroup, JOB_CGROUP, 1_000_000)  # a job that holds no GPU here: never read
    bare = Workload(kind=WorkloadKind.PROCESS, id="3001", name="Xorg")
    manual = Workload(kind=WorkloadKind.MANUAL, id="team-x", name="team-x")
    hosts = reader(cgroup, proc, clock)
    found = hosts.read_hosts([sample("GPU-0", bare, 3001), sample("GPU-1", manual)], NOW)
    assert [h.workload_key for h in found] == ["process:3001"]
    assert hosts.read_hosts([], NOW) == []
