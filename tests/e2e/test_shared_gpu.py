"""Two simulated hours of shared GPUs through real HTTP, held to the simulator's truth.

``shared-node`` has two H100s: GPU 0 time-sliced among three pods (serving, a notebook,
and one that holds its part and never uses it), GPU 1 shared through HAMi by two pods that
declared 30 % and 50 % of its cores (20 % of it unallocated). A real agent posts to a real
collector every simulated minute.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agent.sources.simulated.shared import build_shared_node
from agent.sources.simulated.source import (
    DEFAULT_START_TIME,
    SEGMENT_SECONDS,
    ActivityKind,
    SimulatedFleet,
    SimulatedNode,
)
from collector.records import RecommendationKind
from tests.e2e.fleet_rig import TOKEN, FleetRig
from tests.e2e.truth import relative_error

pytestmark = pytest.mark.slow

STEP_SECONDS = 5.0  # the simulator's activity grid: each interval reads one segment
SHIP_EVERY_TICKS = 12
RUN_SECONDS = 2 * 3600.0
H100_PRICE = 6.88  # the example price book's on-demand price
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def build_shared_fleet() -> SimulatedFleet:
    gpus = build_shared_node("shared-node", 0, DEFAULT_START_TIME)
    return SimulatedFleet([SimulatedNode("shared-node", gpus)])


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetRig]:
    with FleetRig(
        build_shared_fleet(), tmp_path_factory.mktemp("shared"), STEP_SECONDS, SHIP_EVERY_TICKS
    ) as running:
        running.run_until(running.start + RUN_SECONDS)
        running.finish()
        yield running


def pods(rig: FleetRig, index: int) -> dict[str, float]:
    """Workload key -> its price fraction by the rule: declared, else 1/n."""
    gpu = rig.fleet.nodes[0].gpus[index]
    declared = [job.workload.gpu_share for job in gpu.jobs]
    if None in declared:
        return {job.workload.key: 1 / len(gpu.jobs) for job in gpu.jobs}
    return {job.workload.key: float(job.workload.gpu_share or 0.0) for job in gpu.jobs}


def test_per_pod_cost_adds_up_to_the_gpus_price(rig: FleetRig) -> None:
    ledger, hours = rig.collector.ledger, RUN_SECONDS / 3600.0
    per_pod = {ref.key: u.cost for ref, u in ledger.usage_by_workload(rig.start, rig.now)}
    per_gpu = {g.uuid: u.cost for g, u in ledger.usage_by_gpu(rig.start, rig.now)}
    for index in (0, 1):
        fractions = pods(rig, index)
        for key, fraction in fractions.items():
            assert relative_error(per_pod[key], H100_PRICE * fraction * hours) <= 0.005, key
        gpu_cost = per_gpu[rig.fleet.nodes[0].gpus[index].info.uuid]
        assert relative_error(gpu_cost, H100_PRICE * hours) <= 0.005
        held = sum(per_pod[key] for key in fractions)
        assert held <= gpu_cost * (1 + 1e-9)
    time_sliced = sum(per_pod[k] for k in pods(rig, 0))
    assert relative_error(time_sliced, per_gpu[rig.fleet.nodes[0].gpus[0].info.uuid]) <= 1e-9
    assert relative_error(sum(per_pod[k] for k in pods(rig, 1)), 0.8 * H100_PRICE * hours) < 0.005


def test_per_pod_idle_time_matches_each_pods_own_truth(rig: FleetRig) -> None:
    ledger = rig.collector.ledger
    per_pod = {ref.key: u for ref, u in ledger.usage_by_workload(rig.start, rig.now)}
    errors = {}
    for index in (0, 1):
        gpu = rig.fleet.nodes[0].gpus[index]
        for key, fraction in pods(rig, index).items():
            truth = sum(b - a for a, b in gpu.own_idle_intervals(key, rig.start, rig.now))
            measured = per_pod[key].idle_seconds / fraction  # held GPU-seconds -> hours held
            errors[key] = relative_error(measured, truth)
            assert per_pod[key].idle_cost == pytest.approx(
                per_pod[key].idle_seconds * H100_PRICE / 3600.0
            )
    assert max(errors.values()) <= 0.01, errors
    stuck = [j.workload.key for g in rig.fleet.nodes[0].gpus for j in g.jobs
             if j.kind is ActivityKind.STUCK]  # fmt: skip
    for key in stuck:  # held its part and used none of it, with the board busy beside it
        assert per_pod[key].active_seconds == 0.0
        assert per_pod[key].idle_seconds == pytest.approx(pods_fraction(rig, key) * RUN_SECONDS)


def pods_fraction(rig: FleetRig, key: str) -> float:
    return next(f for i in (0, 1) for k, f in pods(rig, i).items() if k == key)


def test_energy_follows_use_and_an_unused_part_draws_only_its_share_of_idle_power(
    rig: FleetRig,
) -> None:
    """Joules by SM share (DESIGN 4): a pod that never computes gets a part of the board's
    energy only while nobody computes (then the board's idle draw splits equally)."""
    per_pod = {r.key: u for r, u in rig.collector.ledger.usage_by_workload(rig.start, rig.now)}
    for gpu in rig.fleet.nodes[0].gpus:
        stuck = next(j.workload.key for j in gpu.jobs if j.kind is ActivityKind.STUCK)
        truth = 0.0
        for segment in range(gpu.segment_at(rig.start), gpu.segment_at(rig.now)):
            if all(sm == 0.0 for sm, _ in gpu.own_activity(segment).values()):
                truth += gpu.power_watts(segment) * SEGMENT_SECONDS / len(gpu.jobs)
        assert relative_error(per_pod[stuck].energy_joules, truth) <= 0.01, stuck
        total = rig.fleet.true_energy_joules(gpu.info.uuid, rig.start, rig.now)
        held = sum(per_pod[j.workload.key].energy_joules for j in gpu.jobs)
        assert relative_error(held, total) <= 0.005


def test_a_pod_idle_on_its_own_beside_a_busy_one_is_released_at_its_share(
    rig: FleetRig,
) -> None:
    window = rig.settings.analysis.idle_window_seconds
    evaluation = rig.settings.analysis.evaluation_interval_seconds
    recs = {r.id: r for r in rig.collector.core.service.recommendations(None)}
    release = RecommendationKind.RELEASE_IDLE.value
    for gpu in rig.fleet.nodes[0].gpus:
        for job in gpu.jobs:
            rec = recs.get(f"{release}:{job.workload.key}")
            key = job.workload.key
            if job.kind is ActivityKind.STUCK:
                assert rec is not None, key
                assert rig.start + window <= rec.opened_at <= rig.start + window + evaluation
                assert rec.gpu_uuids == (gpu.info.uuid,)
                price = H100_PRICE * pods_fraction(rig, key)
                assert rec.savings.money_per_hour == pytest.approx(price)
            else:  # serving and a notebook used their parts within every window
                longest = max(
                    (b - a for a, b in gpu.own_idle_intervals(key, rig.start, rig.now)),
                    default=0.0,
                )
                assert (rec is None) == (longest < window), key


def test_workloads_api_shows_each_pods_own_idle_time_and_cost(
    rig: FleetRig, http: httpx.Client
) -> None:
    params = {"start": rig.start, "end": rig.now}
    body = http.get("/v1/workloads", params=params, headers=AUTH).json()
    rows = {row["key"]: row for row in body["workloads"]}
    for index in (0, 1):
        gpu = rig.fleet.nodes[0].gpus[index]
        for key, fraction in pods(rig, index).items():
            truth = sum(b - a for a, b in gpu.own_idle_intervals(key, rig.start, rig.now))
            usage = rows[key]["usage"]
            assert relative_error(usage["idle_seconds"], truth * fraction) <= 0.01, key
            assert relative_error(usage["cost"], H100_PRICE * fraction * 2) <= 0.005, key
