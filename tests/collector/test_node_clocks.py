"""Nodes whose clocks are off, and backlogs that arrive out of order (issue 16, defects 6
and 7), through the real ingest path: batches submitted as an agent POSTs them to a
collector core over a real SQLite ledger, its applier and recommender driven by one clock.

Ground truth is the simulated node's: when the GPU went idle (on the collector's clock),
its power, and so its true joules and idle seconds."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from collector.accounting.rates import Rates
from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.backend import IngestError, RejectReason
from collector.config import CarbonSettings, CollectorSettings
from collector.fleet.clocks import NodeClocks
from collector.ingest.decode import accept_body
from collector.ledger.store import Ledger
from collector.records import GpuState, RecommendationKind
from collector.service import CollectorCore

C0 = 1_767_225_600.0  # the collector's clock at the start; an hour boundary
WATTS = 300.0
STEP_SECONDS = 10.0  # one sample and one batch per step, as an agent at 0.1 Hz
INFO = GpuInfo(uuid="GPU-s", index=0, name="NVIDIA H100 80GB HBM3")
POD = Workload(kind=WorkloadKind.KUBERNETES_POD, id="p", name="stuck", namespace="ml")


@dataclass
class Rig:
    """A collector core on ``now`` (its clock) and one node whose clock reads
    ``now + offset_seconds``, with one idle GPU held by POD drawing WATTS since C0."""

    core: CollectorCore
    offset_seconds: float
    now: list[float] = field(default_factory=lambda: [C0])
    seq: int = 0

    def sample(self, node_time: float) -> GpuSample:
        true_seconds = node_time - self.offset_seconds - C0  # the collector's clock since C0
        return GpuSample(timestamp=node_time, gpu_uuid=INFO.uuid, sm_activity=0.0,
                         dram_activity=0.0, power_watts=WATTS,
                         energy_joules=WATTS * true_seconds, workloads=(POD,))  # fmt: skip

    def batch(self, node_times: list[float], seq: int | None = None) -> bytes:
        """A batch as the agent builds it: sent right after its newest sample (node clock)."""
        if seq is None:
            self.seq += 1
        samples = tuple(self.sample(t) for t in node_times)
        return msgspec.json.encode(
            Batch(
                schema_version=SCHEMA_VERSION,
                node="skewed",
                agent_boot_id="boot-1",
                seq=self.seq if seq is None else seq,
                sent_at=max(node_times) + 0.5,
                gpus=(INFO,),
                samples=samples,
            )
        )

    def post(self, body: bytes, delay_seconds: float = 0.2) -> int:
        """POST ``body`` arriving ``delay_seconds`` after now; the samples accepted."""
        ack = self.core.service.submit(body, None, self.now[0] + delay_seconds).result(10)
        return ack.samples_accepted

    def run_live(self, until: float) -> float | None:
        """One sample and batch per step, sent as it is taken, until ``until`` (collector
        clock), with the applier and the recommender on their schedules; when the release
        recommendation opened (collector clock), None if it did not."""
        opened_at = None
        while self.now[0] < until:
            self.now[0] += STEP_SECONDS
            self.post(self.batch([self.now[0] + self.offset_seconds]))
            self.core.applier.tick()
            for rec in self.core.recommender.evaluate_if_due(self.now[0]):
                if rec.kind is RecommendationKind.RELEASE_IDLE and opened_at is None:
                    opened_at = self.now[0]
        return opened_at

    def state(self) -> GpuState:
        [view] = self.core.service.fleet(self.now[0])
        return view.state


@pytest.fixture
def rig(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    now = [C0]
    rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    core = CollectorCore.build(CollectorSettings(), ledger, rates, lambda: now[0])
    yield Rig(core, request.param, now)
    ledger.close()


def totals(rig: Rig) -> tuple[float, float]:
    """(energy joules, idle seconds) in the ledger, everything applied."""
    rig.core.applier.tick(flush=True)
    [(_, usage)] = rig.core.ledger.usage_totals_by_gpu()
    return usage.energy_joules, usage.idle_seconds


@pytest.mark.parametrize("rig", [-120.0, 400.0], indirect=True, ids=["behind", "ahead"])
def test_a_skewed_node_is_seen_idle_and_its_stuck_job_released_on_time(rig: Rig) -> None:
    """Before: a node 120 s behind was always "unknown" (its newest sample looked 120 s
    old, stale after 60 s) and never released; a node 400 s ahead had every batch refused
    (422, past the 300 s future tolerance). Now the node's offset, measured from sent_at,
    corrects staleness and windows: released within the idle window + one evaluation of
    when the job truly went idle (C0), and not before the window."""
    analysis = rig.core.recommender.analysis
    window, evaluation = analysis.idle_window_seconds, analysis.evaluation_interval_seconds
    assert rig.run_live(C0 + 600) is None
    assert rig.state() is GpuState.ALLOCATED_IDLE
    assert rig.core.service.health().clock_offsets["skewed"] == pytest.approx(
        rig.offset_seconds, abs=1.0
    )
    opened_at = rig.run_live(C0 + window + evaluation + 2 * STEP_SECONDS)
    assert opened_at is not None, "the stuck job was never released"
    assert C0 + window <= opened_at <= C0 + window + evaluation + STEP_SECONDS
    energy, idle = totals(rig)
    elapsed = rig.now[0] - C0 - STEP_SECONDS  # from the first sample to the last
    assert energy == pytest.approx(WATTS * elapsed, rel=0.005)
    assert idle == pytest.approx(elapsed, rel=0.01)
    assert rig.core.service.fleet_totals().ingest.late_samples == 0


@pytest.mark.parametrize("rig", [0.0], indirect=True)
def test_a_backlog_batch_arriving_after_a_newer_one_is_applied_in_order(rig: Rig) -> None:
    """The issue's case: after an outage the agent's newer batch (600..1200 s) arrives
    seconds before the older one (0..600 s). Before: the older one was acknowledged with 0
    samples accepted and lost (600 s and 180 kJ instead of 1,200 s and 360 kJ)."""
    older = rig.batch([C0 + t for t in range(0, 600, 10)], seq=1)
    newer = rig.batch([C0 + t for t in range(600, 1201, 10)], seq=2)
    rig.now[0] = C0 + 1500  # the collector was unreachable meanwhile
    assert rig.post(newer) == 61
    rig.core.applier.tick()
    rig.now[0] += 5
    assert rig.post(older) == 60
    rig.core.applier.tick()
    assert totals(rig) == pytest.approx((WATTS * 1200, 1200))
    assert rig.core.service.fleet_totals().ingest.late_samples == 0


@pytest.mark.parametrize("rig", [0.0], indirect=True)
def test_a_backlog_filling_a_hole_after_live_data_is_applied_in_order(rig: Rig) -> None:
    """Live until 300 s, an outage, then the backlog newest first: the hole (300..900 s)
    waits for the batch that fills it instead of being booked as unknown time."""
    rig.run_live(C0 + 300)
    rig.now[0] = C0 + 1300
    hole = [C0 + t for t in range(310, 610, 10)]
    after = [C0 + t for t in range(610, 1301, 10)]
    rig.post(rig.batch(after, seq=rig.seq + 2))
    for _ in range(3):  # a few applies while the older batch is on its way
        rig.core.applier.tick()
        rig.now[0] += 15
    assert rig.post(rig.batch(hole, seq=rig.seq + 1)) == len(hole)
    energy, idle = totals(rig)
    assert energy == pytest.approx(WATTS * 1290)  # 10 .. 1300 s
    assert idle == pytest.approx(1290)
    assert rig.core.service.fleet_totals().ingest.late_samples == 0


@pytest.mark.parametrize("rig", [0.0], indirect=True)
def test_a_hole_nobody_fills_is_unknown_time_after_the_backfill_wait(rig: Rig) -> None:
    """An outage with nothing spooled: after the wait, the gap is unknown, not idle, and
    the energy counter still books its joules once."""
    rig.run_live(C0 + 300)
    rig.now[0] = C0 + 900
    rig.post(rig.batch([C0 + t for t in range(900, 1000, 10)]))
    wait = rig.core.fleet.rules.backfill_wait_seconds
    rig.now[0] += wait / 2
    rig.core.applier.tick()
    assert rig.core.fleet.gpu(INFO.uuid).applied_until == C0 + 300  # still waiting
    rig.now[0] += wait
    rig.core.applier.tick()
    assert rig.core.fleet.gpu(INFO.uuid).applied_until > C0 + 900
    energy, idle = totals(rig)
    assert energy == pytest.approx(WATTS * 980)
    assert idle == pytest.approx(290 + 90)


@pytest.mark.parametrize("rig", [0.0], indirect=True)
def test_a_running_agent_met_mid_boot_waits_for_older_batches_then_applies(rig: Rig) -> None:
    """A collector meeting an agent at seq 500 (started, or restarted with an empty ledger,
    while the agent ran) cannot know whether batches 1..499 are still coming: the GPU's
    first readings wait the backfill wait, then apply with nothing lost."""
    wait = rig.core.fleet.rules.backfill_wait_seconds
    rig.now[0] = C0 + 100
    assert rig.post(rig.batch([C0 + t for t in range(0, 101, 10)], seq=500)) == 11
    rig.now[0] += wait / 2
    rig.core.applier.tick()
    assert rig.core.fleet.gpu(INFO.uuid).last is None
    rig.now[0] += wait
    rig.core.applier.tick()
    assert rig.core.fleet.gpu(INFO.uuid).applied_until == C0 + 100
    assert totals(rig) == pytest.approx((WATTS * 100, 100))


def test_a_sample_off_both_the_collector_s_and_the_node_s_clock_is_refused() -> None:
    """Only what fits no sane timeline is refused: a node 400 s ahead is fine, one of its
    samples 400 s ahead of its own batch's clock is not."""
    settings = CollectorSettings()
    clocks = NodeClocks()
    node_now = C0 + 400
    ok = Batch(schema_version=SCHEMA_VERSION, node="n", agent_boot_id="b", seq=1,
               sent_at=node_now, gpus=(INFO,),
               samples=(GpuSample(timestamp=node_now - 1, gpu_uuid=INFO.uuid),))  # fmt: skip
    assert accept_body(msgspec.json.encode(ok), None, C0, settings, clocks) is not None
    bad = msgspec.structs.replace(
        ok, seq=2, samples=(GpuSample(timestamp=node_now + 400, gpu_uuid=INFO.uuid),)
    )
    with pytest.raises(IngestError) as err:
        accept_body(msgspec.json.encode(bad), None, C0 + 1, settings, clocks)
    assert err.value.reason is RejectReason.FUTURE_TIMESTAMP
    assert err.value.field == "$.samples[0].timestamp"


def test_the_offset_ignores_a_spool_backlog_and_follows_a_clock_step() -> None:
    """A batch that waited in a spool arrives late: that is delay, not skew. A node whose
    clock NTP steps forward is followed at once."""
    clocks = NodeClocks()
    for i in range(10):
        clocks.measure("n", C0 + 10 * i - 120, C0 + 10 * i + 0.05)
    clocks.measure("n", C0 - 3600, C0 + 100)  # an hour in the spool
    assert clocks.offset("n") == -120.0
    assert clocks.estimates()["n"] == pytest.approx(-120.05)
    for t in (110, 120, 130):  # stepped to the right time: followed once batches agree
        clocks.measure("n", C0 + t, C0 + t + 0.05)
    assert clocks.offset("n") == 0.0
    clocks.measure("n", C0 + 1e6, C0 + 140)  # a sent_at that is no clock: ignored
    assert clocks.offset("n") == 0.0


def test_a_clock_running_at_another_rate_is_not_corrected() -> None:
    """History replayed as fast as it goes: each batch is a minute further on the node's
    clock and a few milliseconds on the collector's. No offset holds; nothing is moved."""
    clocks = NodeClocks()
    for i in range(20):
        clocks.measure("replay", C0 - 7200 + 60 * i, C0 + 0.05 * i)
    assert clocks.offset("replay") == 0.0


def test_a_node_gone_from_the_fleet_leaves_the_offsets_after_an_hour() -> None:
    clocks = NodeClocks()
    clocks.measure("gone", C0 - 120, C0)
    clocks.measure("here", C0 + 1800, C0 + 1800)
    assert set(clocks.estimates()) == {"gone", "here"}
    clocks.measure("here", C0 + 3601, C0 + 3601)
    assert set(clocks.estimates()) == {"here"}


@pytest.mark.parametrize("rig", [0.0], indirect=True)
def test_a_synchronised_node_whose_batches_arrive_late_is_not_corrected(rig: Rig) -> None:
    """Every batch of a node whose clock is right arrives 1.5 s after it was sent (a slow
    link, a busy collector): the estimate says -1.5 s, and that is delivery, not skew
    (``ingest.clock_correction_min_seconds``, 2 s): its views keep the node's times."""
    for _ in range(10):
        rig.now[0] += STEP_SECONDS
        rig.post(rig.batch([rig.now[0]]), delay_seconds=2.0)  # sent at now + 0.5
    clocks = rig.core.fleet.clocks
    assert clocks.estimates()["skewed"] == pytest.approx(-1.5)
    assert clocks.offset("skewed") == 0.0
    [view] = rig.core.service.fleet(rig.now[0])
    assert view.last_seen == rig.now[0]


def test_an_offset_past_the_minimum_is_corrected_and_one_under_it_is_not() -> None:
    clocks = NodeClocks(min_correction_seconds=20.0)
    for i in range(5):  # a demo's node: each batch arrives one 10 s step after it was sent
        clocks.measure("demo", sent_at=C0 + 10 * i, arrived_at=C0 + 10 * i + 10)
        clocks.measure("skewed", sent_at=C0 + 10 * i + 120, arrived_at=C0 + 10 * i)
    assert clocks.offset("demo") == 0.0
    assert clocks.offset("skewed") == 120.0


@pytest.mark.parametrize("rig", [0.0], indirect=True)
def test_a_gpu_never_committed_applies_after_a_restart_without_the_backfill_wait(
    rig: Rig, tmp_path: Path
) -> None:
    """Batches 1-2 acknowledged, the collector killed before its first commit: the restart
    replays them, then batch 3 arrives. Before: the replay did not count as the GPU's
    first batch, so batch 3 looked like a first batch past its agent's first and the GPU
    waited ``backfill_wait_seconds`` (120 s) for batches 1-2 it already held; a replica
    taking a shard over did the same (tests/e2e/test_replicas.py set the wait to 10 s)."""
    rig.now[0] = C0 + 100
    assert rig.post(rig.batch([C0 + t for t in range(0, 51, 10)])) == 6
    assert rig.post(rig.batch([C0 + t for t in range(60, 101, 10)])) == 5
    rig.core.close()
    rig.core.ledger.close()
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
    rig.core = CollectorCore.build(CollectorSettings(), ledger, rates, lambda: rig.now[0])
    rig.now[0] = C0 + 120
    assert rig.post(rig.batch([C0 + t for t in range(110, 121, 10)])) == 2
    rig.now[0] += rig.core.fleet.rules.reorder_window_seconds + 1  # past the window, not the wait
    rig.core.applier.tick()
    assert rig.core.fleet.gpu(INFO.uuid).applied_until == C0 + 120
    assert totals(rig) == pytest.approx((WATTS * 120, 120))
    ledger.close()
