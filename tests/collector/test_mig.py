"""MIG through the real ingest path: a physical H100 split into 3g + 2g + 2g slices, batches
submitted as an agent POSTs them, held to figures the test builds from its own inputs.

The parent reports power and the energy counter (NVML has none per instance); each slice
reports its own activity and holders. Prices are the example price book's (H100 6.88/h);
a slice costs its compute share of the parent (g / 7).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from agent.model import (
    SCHEMA_VERSION,
    Batch,
    GpuInfo,
    GpuSample,
    Workload,
    WorkloadKind,
    encode_batch,
)
from collector import reports
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from collector.records import GpuState, RecommendationKind
from collector.service import CollectorCore
from gpufleet.cli.collector import build_collector
from tests.collector.http.test_app_fake import AsgiClient
from tests.collector.test_core import T0, example_rates, ingest, open_core

H100_PRICE = 6.88
WATTS = 300.0
PARENT = GpuInfo(uuid="GPU-h100", index=0, name="NVIDIA H100 80GB HBM3", mig_enabled=True)
PROFILES = ("3g.40gb", "2g.20gb", "2g.20gb")
COMPUTE = (3 / 7, 2 / 7, 2 / 7)
SLICES = tuple(
    GpuInfo(
        uuid=f"MIG-{i}",
        index=0,
        name=f"NVIDIA H100 80GB HBM3 MIG {profile}",
        mig_parent_uuid=PARENT.uuid,
        mig_profile=profile,
        memory_total_bytes=int(float(profile.split(".")[1][:-2]) * 1e9),
    )
    for i, profile in enumerate(PROFILES)
)
PODS = tuple(
    Workload(kind=WorkloadKind.KUBERNETES_POD, id=f"u{i}", name=f"w{i}", namespace="ml")
    for i in range(3)
)
#: slice i -> its holder (slice 2 is free unless a test says otherwise)
HELD: tuple[tuple[Workload, ...], ...] = ((PODS[0],), (PODS[1],), ())

#: t (seconds since T0) -> each slice's SM activity
Activity = Callable[[float], Sequence[float]]


def mig_batch(
    seq: int,
    times: range,
    activity: Activity,
    held: Sequence[tuple[Workload, ...]] = HELD,
    parent_activity: bool = False,
) -> Batch:
    """One node's batch: the parent (energy WATTS x t; its own activity, the slices' sum,
    only when ``parent_activity``), then each slice."""
    samples: list[GpuSample] = []
    for t in times:
        sms = activity(t)
        parent_sm = min(1.0, sum(s * c for s, c in zip(sms, COMPUTE, strict=True)))
        samples.append(
            GpuSample(
                timestamp=T0 + t,
                gpu_uuid=PARENT.uuid,
                power_watts=WATTS,
                energy_joules=WATTS * t,
                sm_activity=parent_sm if parent_activity else None,
                dram_activity=parent_sm if parent_activity else None,
            )
        )
        for info, sm, holders in zip(SLICES, sms, held, strict=True):
            samples.append(
                GpuSample(
                    timestamp=T0 + t,
                    gpu_uuid=info.uuid,
                    sm_activity=sm,
                    dram_activity=sm,
                    workloads=holders,
                )
            )
    return Batch(schema_version=SCHEMA_VERSION, node="mig-node", agent_boot_id="b", seq=seq,
                 sent_at=T0, gpus=(PARENT, *SLICES), samples=tuple(samples))  # fmt: skip


def idle(_: float) -> Sequence[float]:
    return (0.0, 0.0, 0.0)


@pytest.fixture
def core(tmp_path):  # type: ignore[no-untyped-def]
    c = open_core(tmp_path / "ledger.db", T0 + 3600)
    yield c
    c.close()
    c.ledger.close()


def run_hour(core: CollectorCore, activity: Activity, **kw: object) -> None:
    ingest(core, mig_batch(1, range(0, 3601, 10), activity, **kw))  # type: ignore[arg-type]
    core.applier.tick(flush=True)


def workload_usage(core: CollectorCore) -> dict[str, object]:
    return {ref.name: u for ref, u in core.ledger.usage_totals_by_workload()}


# -- defect 1: money ------------------------------------------------------------------------


@pytest.mark.parametrize("parent_activity", [False, True])
def test_an_idle_mig_gpu_costs_its_price_once_and_each_slice_its_compute_share(
    core: CollectorCore, parent_activity: bool
) -> None:
    run_hour(core, idle, parent_activity=parent_activity)
    fleet_cost = sum(u.cost for _, u in core.ledger.usage_totals_by_gpu())
    assert fleet_cost == pytest.approx(H100_PRICE, rel=1e-9)  # one GPU-hour, not four
    by_workload = workload_usage(core)
    assert by_workload["w0"].cost == pytest.approx(H100_PRICE * 3 / 7, rel=1e-9)  # type: ignore[attr-defined]
    assert by_workload["w1"].cost == pytest.approx(H100_PRICE * 2 / 7, rel=1e-9)  # type: ignore[attr-defined]


def test_waste_now_of_an_idle_mig_gpu_is_its_price_once(core: CollectorCore) -> None:
    run_hour(core, idle, parent_activity=True)
    views = core.service.fleet(T0 + 3600)
    rates = reports.fleet_rates(views, example_rates(), {}, T0 + 3600)
    assert rates.idle_cost_per_hour == pytest.approx(H100_PRICE, rel=1e-9)
    prices = {v.uuid: v.price_fraction for v in views}
    slices = {s.uuid: share for s, share in zip(SLICES, COMPUTE, strict=True)}
    assert prices == pytest.approx({PARENT.uuid: 0.0, **slices})


# -- defect 2: energy per interval ----------------------------------------------------------


def test_mig_energy_is_split_by_each_intervals_activity_not_the_last_reading(
    core: CollectorCore,
) -> None:
    """First half hour slices at 0.6/0.2/0.2, second half 0.2/0.2/0.6; slice 2 is free."""

    def shifting(t: float) -> Sequence[float]:
        return (0.6, 0.2, 0.2) if t < 1800 else (0.2, 0.2, 0.6)

    run_hour(core, shifting)
    half = WATTS * 1800  # each half hour's parent energy, split by that half's activity
    truth = {"w0": half * 0.6 + half * 0.2, "w1": half * 0.2 + half * 0.2}
    by_workload = workload_usage(core)
    got = {name: u.energy_joules for name, u in by_workload.items()}  # type: ignore[attr-defined]
    assert got == pytest.approx(truth, rel=1e-9)
    gpu_energy = sum(u.energy_joules for _, u in core.ledger.usage_totals_by_gpu())
    assert gpu_energy == pytest.approx(WATTS * 3600, rel=1e-9)  # the parent's, once


# -- defect 3: the parent's state comes from its slices -----------------------------------


def test_a_mig_parent_whose_slices_are_all_held_is_allocated_and_never_scaled_down(
    core: CollectorCore,
) -> None:
    held = ((PODS[0],), (PODS[1],), (PODS[2],))
    run_hour(core, idle, held=held)
    now = T0 + 3600
    views = {v.uuid: v for v in core.service.fleet(now)}
    assert views[PARENT.uuid].state is GpuState.ALLOCATED_IDLE
    recs = core.recommender.evaluate(now)
    scale_downs = [r for r in recs if r.kind is RecommendationKind.SCALE_DOWN]
    assert not [r for r in scale_downs if PARENT.uuid in r.gpu_uuids]
    releases = {r.workload_key: r for r in recs if r.kind is RecommendationKind.RELEASE_IDLE}
    # each holder is told to release its slice, priced at the slice's share
    assert sorted(releases) == sorted(p.key for p in PODS)


def test_a_whole_idle_mig_node_is_scaled_down_at_its_gpus_price_once(
    core: CollectorCore,
) -> None:
    run_hour(core, idle, held=((), (), ()), parent_activity=True)
    recs = core.recommender.evaluate(T0 + 3600)
    [rec] = [r for r in recs if r.kind is RecommendationKind.SCALE_DOWN]
    assert rec.savings.money_per_hour == pytest.approx(H100_PRICE, rel=1e-9)


def test_right_sizing_starts_from_the_slice_a_workload_holds(core: CollectorCore) -> None:
    """A day on the slices at low activity and no memory: w0's 3g slice could be a 1g
    (saving 2/7 of the GPU), w1's 2g a 1g (1/7); a 1g holder would get nothing (it is on
    the smallest), and nobody is told to save against the whole GPU."""
    day = 24 * 3600 + 600
    ingest(core, mig_batch(1, range(0, day + 1, 60), lambda t: (0.02, 0.02, 0.02)))
    core.applier.tick(flush=True)
    recs = core.recommender.evaluate(T0 + day)
    saving = {r.workload_key: r.savings.money_per_hour for r in recs
              if r.kind is RecommendationKind.RIGHT_SIZE}  # fmt: skip
    assert saving == pytest.approx({PODS[0].key: H100_PRICE * 2 / 7, PODS[1].key: H100_PRICE / 7})


def test_mig_parent_state_follows_its_slices(core: CollectorCore) -> None:
    run_hour(core, lambda t: (0.0, 0.5, 0.0))
    assert {v.uuid: v.state for v in core.service.fleet(T0 + 3600)}[PARENT.uuid] is (
        GpuState.ACTIVE
    )


def test_slice_holders_get_no_unknown_seconds_when_the_parent_reports_no_activity(
    core: CollectorCore,
) -> None:
    run_hour(core, idle)
    for name in ("w0", "w1"):
        usage = workload_usage(core)[name]
        assert usage.unknown_seconds == 0.0  # type: ignore[attr-defined]
        assert usage.idle_seconds == pytest.approx(3600.0)  # type: ignore[attr-defined]


def test_the_parents_own_hours_come_from_its_slices_when_it_reports_no_activity(
    core: CollectorCore,
) -> None:
    """First half hour all slices idle, then slice 1 busy: the board was idle, then
    active, held throughout (slices 0 and 1 are), never "unknown"."""
    run_hour(core, lambda t: (0.0, 0.0, 0.0) if t < 1800 else (0.0, 0.7, 0.0))
    usage = {g.uuid: u for g, u in core.ledger.usage_totals_by_gpu()}[PARENT.uuid]
    assert usage.unknown_seconds == 0.0
    assert (usage.idle_seconds, usage.active_seconds) == pytest.approx((1800.0, 1800.0))
    assert usage.allocated_idle_seconds == pytest.approx(1800.0)
    assert usage.cost == 0.0  # its slices carry its price


# -- a re-partitioned GPU -------------------------------------------------------------------


def test_a_repartitioned_gpu_follows_its_new_slices_only(core: CollectorCore) -> None:
    """Ten minutes as 3g + 2g + 2g, busy, then the GPU is re-partitioned into one 7g slice
    held by w2, idle: the old slices no longer count for its state, split or price."""
    ingest(core, mig_batch(1, range(0, 601, 10), lambda t: (0.5, 0.5, 0.5)))
    whole = GpuInfo(uuid="MIG-7", index=0, name="NVIDIA H100 80GB HBM3 MIG 7g.80gb",
                    mig_parent_uuid=PARENT.uuid, mig_profile="7g.80gb")  # fmt: skip
    samples: list[GpuSample] = []
    for t in range(610, 1201, 10):
        samples.append(GpuSample(timestamp=T0 + t, gpu_uuid=PARENT.uuid, power_watts=WATTS,
                                 energy_joules=WATTS * t))  # fmt: skip
        samples.append(GpuSample(timestamp=T0 + t, gpu_uuid=whole.uuid, sm_activity=0.0,
                                 dram_activity=0.0, workloads=(PODS[2],)))  # fmt: skip
    ingest(core, Batch(schema_version=SCHEMA_VERSION, node="mig-node", agent_boot_id="b",
                       seq=2, sent_at=T0 + 1200, gpus=(PARENT, whole),
                       samples=tuple(samples)))  # fmt: skip
    core.applier.tick(flush=True)
    views = {v.uuid: v for v in core.service.fleet(T0 + 1200)}
    assert views[PARENT.uuid].state is GpuState.ALLOCATED_IDLE  # not "unknown" old slices
    assert views[PARENT.uuid].price_fraction == 0.0 and views[whole.uuid].price_fraction == 1.0
    # the old slices until the batch that lists the new one (610 s), w2's from then on
    energy = {name: u.energy_joules for name, u in workload_usage(core).items()}  # type: ignore[attr-defined]
    assert energy["w2"] == pytest.approx(WATTS * 590)
    assert energy["w0"] + energy["w1"] == pytest.approx(WATTS * 610 * 2 / 3)  # 2 of 3 held


def test_the_consoles_waste_now_of_an_idle_mig_gpu_is_its_price_once(tmp_path: Path) -> None:
    """What the console's fleet page adds up (collector/web/static/page_fleet.js): the
    price per hour of every GPU shown idle, from /v1/gpus/usage, over real HTTP routes."""
    token = "console-token-0123456789abcdef"
    settings = CollectorSettings(
        server=ServerSettings(tokens=[token]), ledger=LedgerSettings(url=str(tmp_path / "l.db"))
    )
    built = build_collector(settings, clock=lambda: T0 + 3600, tokens=frozenset([token]))
    try:
        client = AsgiClient(built.app)
        auth = {"Authorization": f"Bearer {token}"}
        batch = encode_batch(mig_batch(1, range(0, 3601, 10), idle, parent_activity=True))
        headers = {**auth, "Content-Type": "application/json"}
        assert client.post("/v1/batches", content=batch, headers=headers).status_code == 200
        built.core.applier.tick(flush=True)
        fleet = client.get("/v1/fleet", headers=auth).json()
        usage = client.get(f"/v1/gpus/usage?start={T0}&end={T0 + 3600}", headers=auth).json()
        price = {g["uuid"]: g["price_per_hour"] for g in usage["gpus"]}
        idle_states = ("allocated_idle", "unallocated")
        waste_now = sum(price[g["uuid"]] for g in fleet["gpus"] if g["state"] in idle_states)
        assert len(fleet["gpus"]) == 4
        assert waste_now == pytest.approx(H100_PRICE, rel=1e-9)
    finally:
        built.ledger.close()
