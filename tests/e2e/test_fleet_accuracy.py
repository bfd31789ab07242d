"""Six simulated hours of a 32-GPU fleet through real HTTP, held to the simulator's truth.

Real agents (Sampler + Shipper with its spool) post to a real collector (uvicorn, SQLite
ledger in a file, bearer token) every simulated minute; the collector applies and
evaluates as ``gpufleet demo`` does. Sampling is every 10 s of simulated time on a 5 s
activity grid, so an idle run may start or end between two samples: the figures below are
measured, not aligned by construction.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from agent.sources.simulated.source import ActivityKind, SimulatedFleet
from collector.config import AnalysisSettings
from collector.records import GpuState, IdleEpisode, RecommendationKind
from tests.e2e.fleet_rig import TOKEN, FleetRig, build_e2e_fleet
from tests.e2e.truth import gpus_of, held_span, relative_error

pytestmark = pytest.mark.slow

STEP_SECONDS = 10.0
SHIP_EVERY_TICKS = 6  # one POST per node per simulated minute
RUN_SECONDS = 6 * 3600.0
ANALYSIS = AnalysisSettings()
WINDOW_SECONDS = ANALYSIS.idle_window_seconds
EVALUATION_SECONDS = ANALYSIS.evaluation_interval_seconds
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetRig]:
    fleet = build_e2e_fleet()  # 4 nodes x 8 GPUs, every workload kind, + jobs arriving late
    assert len(fleet.gpu_uuids) >= 33
    workdir = tmp_path_factory.mktemp("fleet")
    with FleetRig(fleet, workdir, STEP_SECONDS, SHIP_EVERY_TICKS) as running:
        running.run_until(running.start + RUN_SECONDS)
        running.finish()
        yield running


def long_idle_seconds(episodes: list[IdleEpisode], gpu_uuid: str, now: float) -> float:
    lengths = [e.seconds(now) for e in episodes if e.gpu_uuid == gpu_uuid]
    return sum(s for s in lengths if s >= WINDOW_SECONDS)


def test_the_run_covers_six_hours_and_loses_nothing(rig: FleetRig) -> None:
    assert rig.now == rig.start + RUN_SECONDS
    health = rig.collector.core.service.health()
    assert health.pending_samples == 0 and health.ledger_ok
    expected_samples = (RUN_SECONDS / STEP_SECONDS + 1) * len(rig.fleet.gpu_uuids)
    ingest = rig.collector.core.service.stats.snapshot()
    assert ingest.samples_accepted == expected_samples
    assert ingest.late_samples == 0 and not ingest.batches_rejected
    for agent in rig.agents:
        stats = agent.stats.snapshot()
        assert stats.spool_batches == 0 and stats.spool_dropped_batches_total == 0


def test_idle_gpu_hours_per_gpu_within_1_percent_for_episodes_past_the_window(
    rig: FleetRig,
) -> None:
    fleet, start, end = rig.fleet, rig.start, rig.now
    episodes = rig.collector.ledger.idle_episodes(start, end, include_open=True)
    errors = {}
    for uuid in fleet.gpu_uuids:
        truth = fleet.true_idle_seconds(uuid, start, end, min_episode_seconds=WINDOW_SECONDS)
        errors[uuid] = relative_error(long_idle_seconds(episodes, uuid, end), truth)
    assert max(errors.values()) <= 0.01, errors
    # the fleet has long idle episodes to measure: stuck jobs and free GPUs at least
    stuck = fleet.gpus_held_by(ActivityKind.STUCK, start)
    assert all(long_idle_seconds(episodes, u, end) == RUN_SECONDS for u in stuck)
    # each stuck job's GPUs: one idle episode of its own, from its start to its end
    for job in fleet.jobs_of_kind(ActivityKind.STUCK):
        span = held_span(job, start, end)
        for uuid in gpus_of(fleet, job):
            mine = [
                (e.start, e.end if e.end is not None else end)
                for e in episodes
                if e.gpu_uuid == uuid and e.workload_key == job.workload.key
            ]
            assert mine == [span], (job.workload.key, mine)


def test_energy_per_gpu_and_per_workload_within_half_a_percent(rig: FleetRig) -> None:
    fleet, start, end = rig.fleet, rig.start, rig.now
    ledger = rig.collector.ledger
    per_gpu = {gpu.uuid: usage.energy_joules for gpu, usage in ledger.usage_by_gpu(start, end)}
    assert set(per_gpu) == set(fleet.gpu_uuids)
    for uuid, joules in per_gpu.items():
        assert relative_error(joules, fleet.true_energy_joules(uuid, start, end)) <= 0.005, uuid
    per_workload = {ref.key: u.energy_joules for ref, u in ledger.usage_by_workload(start, end)}
    assert set(per_workload) == {job.workload.key for job in fleet.jobs}
    for key, joules in per_workload.items():
        truth = fleet.true_workload_energy_joules(key, start, end)
        assert relative_error(joules, truth) <= 0.005, key


def test_every_stuck_job_gets_a_release_recommendation_within_window_plus_one_evaluation(
    rig: FleetRig,
) -> None:
    recs = {r.id: r for r in rig.collector.core.service.recommendations(None)}
    stuck = rig.fleet.jobs_of_kind(ActivityKind.STUCK)
    assert len(stuck) >= 3
    assert any(job.start_time is not None for job in stuck)  # some start mid-run
    for job in stuck:
        began, ended = held_span(job, rig.start, rig.now)
        rec = recs[f"{RecommendationKind.RELEASE_IDLE.value}:{job.workload.key}"]
        latest = began + WINDOW_SECONDS + EVALUATION_SECONDS
        assert began + WINDOW_SECONDS <= rec.opened_at <= latest
        assert sorted(rec.gpu_uuids) == sorted(gpus_of(rig.fleet, job))
        if ended < rig.now:  # gone: resolved once it has not been desired for a while
            assert rec.status.value == "resolved" and rec.resolved_at is not None
            resolve_by = ended + ANALYSIS.resolve_after_seconds + EVALUATION_SECONDS
            assert ended < rec.resolved_at <= resolve_by
        else:
            assert rec.status.value == "open" and rec.resolved_at is None


def test_busy_training_jobs_never_get_a_release_recommendation(rig: FleetRig) -> None:
    training = {job.workload.key for job in rig.fleet.jobs_of_kind(ActivityKind.TRAINING)}
    assert len(training) >= 3
    released = {
        r.subject
        for r in rig.collector.core.service.recommendations(None)  # every status, resolved too
        if r.kind is RecommendationKind.RELEASE_IDLE
    }
    assert released and not (released & training)


def expected_state(fleet: SimulatedFleet, uuid: str, now: float, threshold: float) -> GpuState:
    sm, dram = fleet.true_activity(uuid, now)
    if sm >= threshold or dram >= threshold:
        return GpuState.ACTIVE
    return GpuState.ALLOCATED_IDLE if fleet.holder(uuid, now) else GpuState.UNALLOCATED


def test_http_fleet_shows_every_gpu_in_its_true_state(rig: FleetRig, http: httpx.Client) -> None:
    body = http.get("/v1/fleet", headers=AUTH).raise_for_status().json()
    assert body["now"] == rig.now
    gpus = {g["uuid"]: g for g in body["gpus"]}
    assert set(gpus) == set(rig.fleet.gpu_uuids)
    for uuid, gpu in gpus.items():
        want = expected_state(rig.fleet, uuid, rig.now, ANALYSIS.idle_threshold)
        assert gpu["state"] == want.value, uuid
    for job in rig.fleet.jobs_of_kind(ActivityKind.STUCK):
        for uuid in gpus_of(rig.fleet, job):
            if rig.fleet.holder(uuid, rig.now) == job.workload:
                assert gpus[uuid]["idle_since"] == held_span(job, rig.start, rig.now)[0]
    assert sum(body["summary"]["gpus_by_state"].values()) == len(gpus)


def test_http_workloads_match_ground_truth(rig: FleetRig, http: httpx.Client) -> None:
    window = {"start": str(rig.start), "end": str(rig.now)}
    body = http.get("/v1/workloads", params=window, headers=AUTH).raise_for_status().json()
    reports = {w["key"]: w for w in body["workloads"]}
    assert set(reports) == {job.workload.key for job in rig.fleet.jobs}
    for key, report in reports.items():
        truth = rig.fleet.true_workload_energy_joules(key, rig.start, rig.now)
        assert relative_error(report["usage"]["energy_joules"], truth) <= 0.005, key
    for job in rig.fleet.jobs_of_kind(ActivityKind.STUCK):
        began, ended = held_span(job, rig.start, rig.now)
        report = reports[job.workload.key]
        assert report["idle_episodes"] == len(gpus_of(rig.fleet, job))
        assert report["longest_idle_seconds"] == ended - began


def test_http_recommendations_agree_with_the_ledger(rig: FleetRig, http: httpx.Client) -> None:
    params = {"status": "all"}
    body = http.get("/v1/recommendations", params=params, headers=AUTH).raise_for_status().json()
    served = {(r["id"], r["status"], r["opened_at"]) for r in body["recommendations"]}
    stored = {
        (r.id, r.status.value, r.opened_at) for r in rig.collector.ledger.recommendations(None)
    }
    assert served == stored and served


@pytest.mark.parametrize("path", ["/v1/fleet", "/v1/workloads", "/v1/recommendations"])
def test_http_api_refuses_requests_without_the_token(http: httpx.Client, path: str) -> None:
    assert http.get(path).status_code == 401
    assert http.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_report_groupings_add_up_to_the_true_fleet(rig: FleetRig) -> None:
    """`gpufleet report` on the run's ledger: every grouping's total is the fleet's true
    energy (0.5 %) and idle GPU-hours (1 %), the same for all four groupings, and
    --by namespace's (unallocated) row is the true energy of GPUs while nobody held them."""
    fleet, start, end = rig.fleet, rig.start, rig.now
    energy_kwh = sum(fleet.true_energy_joules(u, start, end) for u in fleet.gpu_uuids) / 3.6e6
    keys = {job.workload.key for job in fleet.jobs}
    held_kwh = sum(fleet.true_workload_energy_joules(k, start, end) for k in keys) / 3.6e6
    idle_hours = sum(fleet.true_idle_seconds(u, start, end) for u in fleet.gpu_uuids) / 3600
    totals = []
    for by in ("namespace", "team", "model", "node"):
        out = subprocess.run(
            [sys.executable, "-m", "gpufleet", "report", "--db", rig.settings.ledger.url,
             "--by", by, "--period", f"{(end - start) / 3600:g}h", "--end", f"{end:.0f}",
             "--format", "json"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        answer = json.loads(out.stdout)
        assert (answer["start"], answer["end"]) == (iso(start), iso(end))
        total = answer["total"]
        assert relative_error(total["energy_kwh"], energy_kwh) <= 0.005, by
        assert relative_error(total["idle_gpu_hours"], idle_hours) <= 0.01, by
        totals.append(total)
        if by == "namespace":
            rows = {r["group"]: r for r in answer["rows"]}
            unallocated_kwh = energy_kwh - held_kwh
            assert relative_error(rows["(unallocated)"]["energy_kwh"], unallocated_kwh) <= 0.005
    assert all(t == totals[0] for t in totals)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
