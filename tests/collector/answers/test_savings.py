"""Savings proven: after the enforced releases in the simulated fleet (the simulated jobs
end where the executors acted; an hour later another stuck job holds one released GPU idle
for an hour), the GPU-hours freed that /v1/savings and ``gpufleet report --savings`` report
equal the simulator's ground truth of GPU-hours not held idle afterwards, within 1 %."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import msgspec
import pytest

from agent.sources.simulated.gpu import SimulatedGpu
from agent.sources.simulated.workloads import ActivityKind, make_pattern
from collector.efficiency_report import efficiency_report
from collector.savings_report import savings_report
from tests.collector.answers.rig import HOUR, JOB, POD, AnswerRig, answer_rig
from tests.e2e.collector_process import ROOT
from tests.e2e.fleet_rig import TOKEN

pytestmark = pytest.mark.slow
NEXT = "pod:research/sweep-worker-next"


def gpus_of(rig: AnswerRig, key: str) -> list[SimulatedGpu]:
    return [g for g in rig.fleet_gpus() if any(j.workload.key == key for j in g.jobs)]


def end_job(gpu: SimulatedGpu, key: str, at: float, then_idle_from: float | None) -> None:
    """The world after a release: ``key``'s job ends at ``at``; optionally another stuck
    job holds the GPU idle from ``then_idle_from`` for an hour."""
    jobs = [dataclasses.replace(j, end_time=at) if j.workload.key == key else j for j in gpu.jobs]
    if then_idle_from is not None:
        old = next(j for j in gpu.jobs if j.workload.key == key)
        workload = msgspec.structs.replace(old.workload, id="next", name="sweep-worker-next")
        pattern = make_pattern(ActivityKind.STUCK, 4242)
        jobs.append(
            dataclasses.replace(
                old,
                workload=workload,
                pattern=pattern,
                start_time=then_idle_from,
                end_time=then_idle_from + HOUR,
            )
        )
    gpu.reschedule(tuple(jobs), at)


def true_not_held_idle_seconds(gpu: SimulatedGpu, start: float, end: float) -> float:
    """From the simulator: seconds in [start, end) the GPU was not held idle by anyone."""
    total, k = 0.0, gpu.segment_at(start)
    while gpu.segment_start(k) < end:
        a, b = max(start, gpu.segment_start(k)), min(end, gpu.segment_start(k + 1))
        sm, dram = gpu.activity(k)
        held_idle = gpu.job_at(gpu.segment_start(k)) is not None and max(sm, dram) < 0.01
        total += 0.0 if held_idle else b - a
        k += 1
    return total


def test_savings_after_enforced_releases_equal_the_simulators_truth(tmp_path: Path) -> None:
    with answer_rig(tmp_path) as rig:
        released: dict[str, float] = {}

        def world() -> None:  # the simulated jobs end where the executors acted
            for e in rig.collector.alerting.engine.log.entries():  # type: ignore[union-attr]
                if e.stage == "act" and e.decision == "acted" and e.workload_key not in released:
                    released[e.workload_key] = e.at
                    for gpu in gpus_of(rig, e.workload_key):
                        later = e.at + HOUR if e.workload_key == POD else None
                        end_job(gpu, e.workload_key, e.at, later)

        rig.run_until(rig.start + 8 * HOUR, after_pass=world)
        assert set(released) == {POD, JOB}
        end = rig.clock()
        rig.collector.core.applier.tick(flush=True)
        ledger = rig.collector.ledger
        rec = ledger.get_recommendation(f"release_idle:{JOB}")
        assert rec is not None
        report = savings_report(ledger, rig.start, end, "USD")
        served = httpx.get(
            f"{rig.url}/v1/savings",
            params={"start": rig.start, "end": end},
            headers={"Authorization": f"Bearer {TOKEN}"},
        ).json()
        printed = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpufleet",
                "report",
                "--savings",
                "--db",
                str(tmp_path / "ledger.db"),
                "--end",
                str(end),
                "--period",
                f"{(end - rig.start) / HOUR:g}h",
                "--format",
                "json",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        metrics = httpx.get(f"{rig.url}/metrics").text
        weekly = efficiency_report(ledger, "team", "search", end, "weekly", end, "USD")
        truth = {
            key: sum(true_not_held_idle_seconds(g, at, end) for g in gpus_of(rig, key)) / HOUR
            for key, at in released.items()
        }
    by_key = {r.workload_key: r for r in report.releases}
    assert set(by_key) == {POD, JOB}
    for key, hours in truth.items():
        assert by_key[key].freed_gpu_hours == pytest.approx(hours, rel=0.01), key
    # the pod's GPU was held idle by the next job for an hour of the 6 after its release
    assert truth[POD] == pytest.approx(truth[JOB] - 1.0, abs=0.05)
    assert report.released_gpu_hours == pytest.approx(sum(truth.values()), rel=0.01)
    assert report.summary.startswith(f"gpufleet released {report.released_gpu_hours:.0f} idle")
    assert served == json.loads(msgspec.json.encode(report))
    assert json.loads(printed.stdout) == served
    freed = float(re.search(r"^gpufleet_savings_freed_gpu_seconds (\S+)$", metrics, re.M)[1])  # type: ignore[index]
    assert freed == pytest.approx(report.released_gpu_hours * HOUR)
    assert 'gpufleet_savings_releases{by="auto"} 2.0' in metrics
    # team search's weekly report carries its own release (the pod's), not emeka's job
    assert [r.workload_key for r in weekly.savings.releases] == [POD]
    assert weekly.savings.releases[0] == by_key[POD]
    assert weekly.savings.summary.startswith("gpufleet released 5 idle GPU-hours this week")
    # priced at the recommendation's own rate per GPU-hour
    rate = rec.savings.money_per_hour / len(rec.gpu_uuids)
    assert by_key[JOB].money == pytest.approx(by_key[JOB].freed_gpu_hours * rate, rel=1e-3)
    assert by_key[JOB].energy_kwh > 0
