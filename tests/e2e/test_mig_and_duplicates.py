"""Two simulated hours of a MIG node and a cloned node through real HTTP, held to the
simulator's truth.

``mig-node`` has two H100s in MIG mode with slices of mixed profiles and holders: GPU 0
(3g training, 2g inference, 1g stuck, 1g free; the parent reports GPM activity) and GPU 1
(4g notebook, 2g stuck, 1g free; the parent reports none, as NVML without GPM). ``plain``
has two whole H100s, and ``plain-clone`` is a VM cloned from its image: it reports the
same GPU uuids. Real agents post to a real collector every simulated minute.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agent.sources.simulated.mig import EXAMPLE_LAYOUTS
from agent.sources.simulated.source import ActivityKind, SimulatedFleet, SimulatedNode
from collector.config import AnalysisSettings
from collector.records import IdleEpisode, RecommendationKind
from tests.e2e.fleet_rig import TOKEN, FleetRig
from tests.e2e.truth import relative_error

pytestmark = pytest.mark.slow

#: on the simulator's 5 s activity grid: each interval is one segment, whose activity its
#: starting sample reads. A MIG parent's energy is split by its slices' activity; at 10 s
#: a segment between two samples is never seen, and a bursty slice's energy is off by
#: 1-3 % (the board draws more exactly when that slice is busy): no sampled split can know
STEP_SECONDS = 5.0
SHIP_EVERY_TICKS = 12
RUN_SECONDS = 2 * 3600.0
ANALYSIS = AnalysisSettings()
WINDOW_SECONDS = ANALYSIS.idle_window_seconds
EVALUATION_SECONDS = ANALYSIS.evaluation_interval_seconds
AUTH = {"Authorization": f"Bearer {TOKEN}"}
H100_PRICE = 6.88  # the example price book's on-demand price
TRAIN, INFER, STUCK = ActivityKind.TRAINING, ActivityKind.INFERENCE, ActivityKind.STUCK


def build_mig_fleet() -> SimulatedFleet:
    mig = SimulatedNode.build_mig("mig-node", EXAMPLE_LAYOUTS)
    plain = SimulatedNode.build("plain", ["H100", "H100"], flavour=1)
    return SimulatedFleet([mig, plain, plain.clone("plain-clone")])


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetRig]:
    with FleetRig(
        build_mig_fleet(), tmp_path_factory.mktemp("mig"), STEP_SECONDS, SHIP_EVERY_TICKS
    ) as running:
        running.run_until(running.start + RUN_SECONDS)
        running.finish()
        yield running


def slices(fleet: SimulatedFleet) -> list[str]:
    return [g.info.uuid for g in fleet.nodes[0].gpus if g.info.mig_parent_uuid is not None]


def slice_share(fleet: SimulatedFleet, uuid: str) -> float:
    """The slice's compute share (g / 7) of its parent's price: the default basis."""
    return int(str(fleet.gpu(uuid).info.mig_profile).split("g.")[0]) / 7


def mig_jobs(fleet: SimulatedFleet) -> dict[str, str]:
    """Workload key -> the slice it holds."""
    return {job.workload.key: uuid for uuid in slices(fleet) for job in fleet.gpu(uuid).jobs}


def test_energy_per_mig_workload_within_half_a_percent(rig: FleetRig) -> None:
    fleet, start, end = rig.fleet, rig.start, rig.now
    per_workload = {
        ref.key: u.energy_joules for ref, u in rig.collector.ledger.usage_by_workload(start, end)
    }
    errors = {
        key: relative_error(per_workload[key], fleet.true_workload_energy_joules(key, start, end))
        for key in mig_jobs(fleet)
    }
    assert max(errors.values()) <= 0.005, errors
    # each board's energy is counted once, on the parent
    per_gpu = {g.uuid: u.energy_joules for g, u in rig.collector.ledger.usage_by_gpu(start, end)}
    for parent in (g for g in fleet.nodes[0].gpus if g.info.mig_enabled):
        truth = fleet.true_energy_joules(parent.info.uuid, start, end)
        assert relative_error(per_gpu[parent.info.uuid], truth) <= 0.005


def test_money_per_mig_workload_and_fleet_within_half_a_percent(rig: FleetRig) -> None:
    fleet, start, end = rig.fleet, rig.start, rig.now
    hours = RUN_SECONDS / 3600.0
    ledger = rig.collector.ledger
    per_workload = {ref.key: u.cost for ref, u in ledger.usage_by_workload(start, end)}
    for key, uuid in mig_jobs(fleet).items():
        truth = H100_PRICE * slice_share(fleet, uuid) * hours  # held, and known, all run
        assert relative_error(per_workload[key], truth) <= 0.005, key
    fleet_cost = sum(u.cost for _, u in ledger.usage_by_gpu(start, end))
    boards = 4  # 2 MIG H100s (fully split) + 2 whole H100s; the clone's are refused
    assert relative_error(fleet_cost, H100_PRICE * boards * hours) <= 0.005


def long_idle_seconds(episodes: list[IdleEpisode], uuid: str, now: float) -> float:
    return sum(
        (e.end if e.end is not None else now) - e.start
        for e in episodes
        if e.gpu_uuid == uuid and (e.end if e.end is not None else now) - e.start >= WINDOW_SECONDS
    )


def test_idle_gpu_hours_per_slice_within_1_percent(rig: FleetRig) -> None:
    fleet, start, end = rig.fleet, rig.start, rig.now
    episodes = rig.collector.ledger.idle_episodes(start, end, include_open=True)
    errors = {}
    for uuid in slices(fleet):
        truth = fleet.true_idle_seconds(uuid, start, end, min_episode_seconds=WINDOW_SECONDS)
        errors[uuid] = relative_error(long_idle_seconds(episodes, uuid, end), truth)
    assert max(errors.values()) <= 0.01, errors
    free_or_stuck = [u for u in slices(fleet) if not fleet.gpu(u).jobs or
                     fleet.gpu(u).jobs[0].kind is STUCK]  # fmt: skip
    assert len(free_or_stuck) == 4
    assert all(long_idle_seconds(episodes, u, end) == RUN_SECONDS for u in free_or_stuck)


def test_stuck_slices_are_released_in_time_at_their_share_and_busy_ones_never(
    rig: FleetRig,
) -> None:
    recs = {r.id: r for r in rig.collector.core.service.recommendations(None)}
    release = RecommendationKind.RELEASE_IDLE.value
    for key, uuid in mig_jobs(rig.fleet).items():
        kind = rig.fleet.gpu(uuid).jobs[0].kind
        rec = recs.get(f"{release}:{key}")
        if kind is STUCK:
            assert rec is not None, key
            assert rig.start + WINDOW_SECONDS <= rec.opened_at
            assert rec.opened_at <= rig.start + WINDOW_SECONDS + EVALUATION_SECONDS
            assert rec.gpu_uuids == (uuid,)
            share = H100_PRICE * slice_share(rig.fleet, uuid)
            assert rec.savings.money_per_hour == pytest.approx(share)
        elif kind in (TRAIN, INFER):
            assert rec is None, key
    # no MIG parent is "unallocated" capacity to scale down: its slices are held
    parents = {g.info.uuid for g in rig.fleet.nodes[0].gpus if g.info.mig_enabled}
    for rec in recs.values():
        if rec.kind is RecommendationKind.SCALE_DOWN:
            assert not parents & set(rec.gpu_uuids), rec


def test_the_cloned_node_is_refused_and_the_first_nodes_figures_stay_true(
    rig: FleetRig, http: httpx.Client
) -> None:
    fleet, start, end = rig.fleet, rig.start, rig.now
    plain = [g.info.uuid for g in fleet.nodes[1].gpus]
    body = http.get("/v1/fleet", headers=AUTH).json()
    nodes = {g["uuid"]: g["node"] for g in body["gpus"]}
    assert [nodes[u] for u in plain] == ["plain", "plain"]
    claims = {(d["uuid"], d["node"], d["claimed_by"]) for d in body["duplicate_gpus"]}
    assert claims == {(u, "plain", "plain-clone") for u in plain}
    per_gpu = {g.uuid: u.energy_joules for g, u in rig.collector.ledger.usage_by_gpu(start, end)}
    for uuid in plain:
        assert relative_error(per_gpu[uuid], fleet.true_energy_joules(uuid, start, end)) <= 0.005
    metrics = http.get("/metrics", headers=AUTH).text
    line = next(
        x for x in metrics.splitlines()
        if x.startswith('gpufleet_collector_rejected_batches_total{reason="duplicate_gpu"}')
    )  # fmt: skip
    clone = rig.agents[2].stats.snapshot()  # every batch the clone sent was refused ...
    assert clone.batches_sent_total == 0 and clone.spool_dropped_batches_total == 0
    held = clone.batches_held_total["duplicate_gpu"]  # ... and kept: the claim can expire
    assert float(line.split()[-1]) == held > 0
    original = rig.agents[1].stats.snapshot()
    assert original.batches_sent_total > 0 and original.spool_dropped_batches_total == 0
