"""Slurm end to end on a real Slurm 22.05 cluster (issue 19): three real jobs on four fake
GPUs, the agent attributing them from /proc and squeue, the collector charging each
account, and the idle job cancelled with a real scancel under an ``enforce`` policy.

Why the fake NVML library: the jobs run ``sleep``, which no GPU sees, so the GPUs' side
must come from a stand-in. The fake NVML C library (tests/fakes) is the lowest layer: the
real binding and the real NvmlSource read it, and a test can say exactly which GPU is busy
(``utilization.gpu`` 90 %) and which PIDs run on it. The busy jobs' ``sleep`` PIDs are put
on the GPUs Slurm gave them (their ``gres_detail`` indices), so the agent finds those jobs
through /proc/PID/environ; the idle job has no process on its GPU (a notebook that
allocated a GPU and never used it), so only Slurm's allocation (squeue) tells who holds it.
The simulated clock moves two hours and a quarter in 60 s steps; the Slurm jobs are real
and stay RUNNING (``sleep 600``) for the few wall seconds the run takes.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent.attribution.attributor import Attributor
from agent.config import AttributionSettings, ShipperSettings, SourceSettings
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.nvml.source import NvmlSource
from agent.stats import AgentStats
from collector.actions.settings import ActionSettings, PolicySettings, SlurmSettings
from collector.config import AnalysisSettings, CollectorSettings, LedgerSettings, ServerSettings
from gpufleet.cli.collector import build_collector, serve
from gpufleet.cli.demo_fleet import SimClock
from tests.e2e.fleet_rig import TOKEN, free_port
from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario
from tests.fakes.nvml_scenario import ProcessSpec, Scenario
from tests.slurm.cluster import SlurmCluster

pytestmark = pytest.mark.slow

STEP, SHIP_EVERY, HOUR = 60.0, 5, 3600.0
RUN_SECONDS = 2 * HOUR + 15 * 60
BUSY_PERCENT = 90


@dataclasses.dataclass(frozen=True)
class Job:
    job_id: str
    account: str
    gpu_indexes: tuple[int, ...]
    pid: int
    busy: bool


def submit(cluster: SlurmCluster) -> dict[str, Job]:
    asked = {
        "train": ("2", "team-a", "gpu", True),
        "infer": ("1", "team-b", "debug", True),
        "notebook": ("1", "team-b", "gpu", False),
    }
    ids = {
        name: cluster.sbatch(f"--gres=gpu:{n}", "-A", account, "-p", partition, "-J", name)
        for name, (n, account, partition, _) in asked.items()
    }
    jobs = {}
    for name, job_id in ids.items():
        record = cluster.wait_running(job_id)
        (detail,) = record["gres_detail"]  # Slurm's own word on which GPUs: "gpu:2(IDX:0-1)"
        low, _, high = detail.split("IDX:")[1].rstrip(")").partition("-")
        indexes = tuple(range(int(low), int(high or low) + 1))
        _, account, _, busy = asked[name]
        jobs[name] = Job(job_id, account, indexes, max(cluster.job_pids(job_id)), busy)
    return jobs


def gpus_of(jobs: dict[str, Job]) -> Scenario:
    """Four fake A100s; each busy job's PID on its GPUs at 90 %, the idle job's GPU at 0 %."""
    base = load_scenario("a100_4x_no_gpm")
    gpus = list(base.gpus)
    for job in jobs.values():
        for index in job.gpu_indexes:
            processes = (ProcessSpec(job.pid, 2 << 30, BUSY_PERCENT),) if job.busy else ()
            gpus[index] = dataclasses.replace(
                gpus[index],
                processes=processes,
                utilization_gpu_percent=BUSY_PERCENT if job.busy else 0,
                utilization_memory_percent=40 if job.busy else 0,
            )
    return dataclasses.replace(base, gpus=tuple(gpus))


def report(db: Path, by: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "gpufleet", "report", "--db", str(db), "--by", by,
         "--period", "1d", "--format", "json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return {r["group"]: r for r in json.loads(out.stdout)["rows"]}


def test_the_idle_job_is_cancelled_the_busy_ones_run_on_and_accounts_are_charged(
    slurm_jobs: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", slurm_jobs.env["SLURM_CONF"])  # the collector's scancel
    jobs = submit(slurm_jobs)
    start = time.time() - 3 * HOUR  # the report's period (the last day) covers the run
    clock, nvml_clock = SimClock(start), FakeClock()
    port = free_port()
    policy = PolicySettings(mode="enforce", dry_run=False, release_after_seconds=2 * HOUR,
                            min_runtime_seconds=HOUR)  # fmt: skip
    settings = CollectorSettings(
        server=ServerSettings(port=port, tokens=[TOKEN]),
        ledger=LedgerSettings(url=str(tmp_path / "ledger.db")),
        analysis=AnalysisSettings(stale_after_seconds=3 * STEP),
        actions=ActionSettings(
            default=policy, max_data_age_seconds=3 * STEP, slurm=SlurmSettings(enabled=True)
        ),
    )
    attribution = AttributionSettings(
        kubelet_socket=tmp_path / "no-kubelet.sock",
        gpustat_dir=tmp_path / "no-gpustat",
        squeue_path="squeue",
        slurm_conf=slurm_jobs.directory / "slurm.conf",
        slurm_node=slurm_jobs.node,
    )
    collector = build_collector(settings, clock, tokens=frozenset([TOKEN]))
    server = serve(collector)
    stats = AgentStats()
    shipper = Shipper(
        ShipperSettings(url=f"http://127.0.0.1:{port}", token=TOKEN, spool_dir=tmp_path / "spool"),
        slurm_jobs.node, stats, clock=clock,
    )  # fmt: skip
    try:
        with install_fake_nvml(gpus_of(jobs), nvml_clock):
            source = NvmlSource(SourceSettings(), stats, monotonic=nvml_clock)
            source.discover()
            sampler = Sampler(
                # the agent's caches (squeue, /proc) age in its own, simulated, time
                source,
                stats,
                STEP,
                Attributor(attribution, stats, clock),
                shipper,
                clock=clock,
            )
            ticks = 0
            while ticks * STEP <= RUN_SECONDS:
                clock.set(start + ticks * STEP)
                nvml_clock.advance(STEP)
                samples = sampler.tick()
                ticks += 1
                if ticks % SHIP_EVERY == 0:
                    shipper.flush()
                    collector.core.applier.tick()
                    collector.core.recommender.evaluate_if_due()
                    collector.alert()
            source.close()
        entries = collector.alerting.engine.log.entries()  # type: ignore[union-attr]
    finally:
        shipper.close()
        server.should_exit = True
        collector.stop()

    # the agent's view at the last tick: each GPU held by the job Slurm gave it
    holders = {s.gpu_uuid: s.workloads for s in samples}
    uuids = [g.uuid for g in gpus_of(jobs).gpus]
    for name in ("train", "infer"):
        job = jobs[name]
        for index in job.gpu_indexes:
            (workload,) = holders[uuids[index]]
            assert workload.key == f"slurm:{job.job_id}" and workload.name == name
            assert workload.user == "root"
            assert workload.labels["slurm_account"] == job.account
    idle_gpu = uuids[jobs["notebook"].gpu_indexes[0]]
    assert holders[idle_gpu] == ()  # cancelled: nobody holds it any more

    # only the idle job was acted on: warned at 50 % and 90 % of the way, then cancelled
    notebook = jobs["notebook"]
    by_key: dict[str, list[tuple[str, str, float]]] = {}
    for e in entries:
        by_key.setdefault(e.workload_key, []).append((e.stage, e.decision, e.at - start))
    assert set(by_key) == {f"slurm:{notebook.job_id}"}
    steps = by_key[f"slurm:{notebook.job_id}"]
    assert [(s, d) for s, d, _ in steps] == [
        ("warn:0.5", "warned"), ("warn:0.9", "warned"), ("act", "acted"),
    ]  # fmt: skip
    acted_at = steps[-1][2]
    assert 2 * HOUR <= acted_at < 2 * HOUR + SHIP_EVERY * STEP
    assert slurm_jobs.job(notebook.job_id)["job_state"] == "CANCELLED"  # type: ignore[index]
    assert slurm_jobs.job_pids(notebook.job_id) == []
    for name in ("train", "infer"):
        assert slurm_jobs.job(jobs[name].job_id)["job_state"] == "RUNNING"  # type: ignore[index]

    # gpufleet report --by account: team-a's two busy GPUs for the whole run, team-b's busy
    # one plus the idle one until it was cancelled
    rows = report(tmp_path / "ledger.db", "account")
    run_hours = RUN_SECONDS / HOUR
    assert rows["team-a"]["gpu_hours"] == pytest.approx(2 * run_hours, abs=2 * STEP / HOUR)
    assert rows["team-a"]["idle_gpu_hours"] == 0
    assert rows["team-b"]["gpu_hours"] == pytest.approx(
        run_hours + acted_at / HOUR, abs=2 * STEP / HOUR
    )
    assert rows["team-b"]["idle_gpu_hours"] == pytest.approx(acted_at / HOUR, abs=2 * STEP / HOUR)
    assert rows["team-b"]["waste"] > 0 and rows["team-a"]["waste"] == 0
    assert set(rows) == {"team-a", "team-b", "(unallocated)"}
