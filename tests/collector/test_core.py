"""The collector's core over a real SQLite ledger: submit, apply, restore after a crash,
reports."""

from __future__ import annotations

import gzip
import math
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from collector import reports
from collector.accounting.rates import Rates
from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.backend import IngestError
from collector.config import AnalysisSettings, CarbonSettings, CollectorSettings
from collector.ledger.observers import StoredBatch
from collector.ledger.store import Ledger, LedgerWrite
from collector.service import CollectorCore
from collector.usage_report import ledger_period
from gpufleet.settings import ConfigError, load_settings

T0 = 1_767_225_600.0  # an hour boundary
WATTS = 100.0
INFO = GpuInfo(uuid="GPU-p", index=0, name="NVIDIA H100 80GB HBM3")
POD = Workload(kind=WorkloadKind.KUBERNETES_POD, id="p", name="nb", namespace="ml")


def sample(t: float, sm: float) -> GpuSample:
    """A reading at T0 + t of a GPU drawing WATTS since T0, held by POD."""
    return GpuSample(timestamp=T0 + t, gpu_uuid=INFO.uuid, sm_activity=sm, dram_activity=sm,
                     power_watts=WATTS, energy_joules=WATTS * t, workloads=(POD,))  # fmt: skip


def batch(seq: int, times: range, sm: float = 0.5, boot: str = "boot-1") -> Batch:
    return Batch(schema_version=SCHEMA_VERSION, node="n", agent_boot_id=boot, seq=seq,
                 sent_at=T0, gpus=(INFO,), samples=tuple(sample(t, sm) for t in times))  # fmt: skip


def example_rates() -> Rates:
    return Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())


def open_core(db: Path, now: float) -> CollectorCore:
    return CollectorCore.build(
        CollectorSettings(), Ledger.open(str(db)), example_rates(), lambda: now
    )


def ingest(core: CollectorCore, b: Batch) -> str:
    """What the HTTP edge does with a batch an agent sent right after its newest sample;
    returns the ack's status."""
    sent_at = max([T0, *(s.timestamp for s in b.samples)])
    return core.service.submit(msgspec.json.encode(b), None, sent_at).result(10).status


def energy(core: CollectorCore) -> float:
    return sum(u.energy_joules for _, u in core.ledger.usage_totals_by_gpu())


class Seen:
    """An observer that notes each stored batch's seq and the thread it was told on."""

    def __init__(self, seen: list[tuple[int, str]]) -> None:
        self.seen = seen

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        name = threading.current_thread().name
        self.seen.extend((s.batch.seq, name) for s in stored)

    def write_committed(self, write: LedgerWrite) -> None:
        pass


@pytest.fixture
def core(tmp_path: Path) -> Iterator[CollectorCore]:
    p = open_core(tmp_path / "ledger.db", T0)  # clock at the data: the window decides
    yield p
    p.ledger.close()


def test_a_repeated_batch_is_acknowledged_and_counted_once(core: CollectorCore) -> None:
    assert ingest(core, batch(1, range(0, 60, 10))) == "accepted"
    assert ingest(core, batch(1, range(0, 60, 10))) == "duplicate"
    assert ingest(core, batch(2, range(60, 120, 10))) == "accepted"
    core.applier.tick(flush=True)
    assert energy(core) == WATTS * 110


def test_tick_holds_the_reorder_window_and_flush_applies_the_rest(tmp_path: Path) -> None:
    core = open_core(tmp_path / "ledger.db", T0 + 90)  # the samples are current
    ingest(core, batch(1, range(0, 100, 10)))  # newest 90; window 30 s
    assert core.applier.tick() == 7  # 0..60
    assert energy(core) == WATTS * 60
    assert core.service.health().pending_samples == 3 and core.service.health().lag_seconds == 30
    assert core.applier.tick(flush=True) == 3
    assert energy(core) == WATTS * 90 and core.service.health().pending_samples == 0
    core.ledger.close()


def test_a_gpu_that_stops_reporting_is_applied_a_window_later_by_the_clock(
    tmp_path: Path,
) -> None:
    now = [T0 + 90]
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    core = CollectorCore.build(CollectorSettings(), ledger, example_rates(), lambda: now[0])
    ingest(core, batch(1, range(0, 100, 10)))  # then the GPU goes quiet
    assert core.applier.tick() == 7  # 0..60: the window behind its newest reading (90)
    now[0] = T0 + 125  # 35 s of silence: everything is older than the window now
    assert core.applier.tick() == 3
    assert core.service.health().pending_samples == 0
    # applied, not committed yet: the last commit (the first tick's) is 35 s old, the
    # commit interval 60 s; the batch stays pending until the ledger has its samples
    assert energy(core) == WATTS * 60 and ledger.pending_batches()
    now[0] = T0 + 150  # the next apply, 60 s after the last commit: no samples, a commit
    assert core.applier.tick() == 0
    assert energy(core) == WATTS * 90 and not ledger.pending_batches()
    ledger.close()


def test_after_a_crash_restore_resumes_with_nothing_lost_and_nothing_twice(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    first = open_core(db, T0 + 90)
    ingest(first, batch(1, range(0, 100, 10)))
    first.applier.tick()  # applies 0..60; 70..90 are acknowledged, durable, not applied
    ingest(first, batch(2, range(100, 200, 10)))  # acknowledged, never applied
    first.ledger.close()  # the process dies: nothing else is written
    second = open_core(db, T0 + 90)
    assert second.service.health().pending_samples == 13  # 70..190 replayed from the ledger
    # 0..60 of batch 1 were applied before the crash: skipped on replay, not "late"
    assert second.service.stats.snapshot().late_samples == 0
    assert ingest(second, batch(2, range(100, 200, 10))) == "duplicate"  # the agent resends
    ingest(second, batch(3, range(200, 300, 10)))
    second.applier.tick(flush=True)
    assert energy(second) == WATTS * 290
    (usage,) = [u for _, u in second.ledger.usage_totals_by_workload()]
    assert usage.active_seconds == 290
    second.ledger.close()


def test_fleet_totals_say_when_each_workload_last_held_a_gpu(core: CollectorCore) -> None:
    ingest(core, batch(1, range(0, 100, 10)))
    core.applier.tick(flush=True)
    totals = core.service.fleet_totals()
    [pod_energy] = [e for e in totals.energy if e.workload == POD.key]
    [pod_waste] = [w for w in totals.waste if w.workload == POD.key]
    assert pod_energy.last_seen == pod_waste.last_seen == T0 + 90  # its last interval's end
    assert all(e.last_seen == math.inf for e in totals.energy if e.workload == "")


def test_health_says_when_the_ledger_fails(core: CollectorCore) -> None:
    assert core.service.health().ledger_ok
    core.ledger.close()
    report = core.service.health()
    assert not report.ledger_ok and "closed" in report.detail


def test_a_gzipped_body_is_kept_as_sent_and_replayed_after_a_crash(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    first = open_core(db, T0 + 90)
    sent = batch(1, range(0, 100, 10))
    gzipped = gzip.compress(msgspec.json.encode(sent))
    assert first.service.submit(gzipped, "gzip", T0 + 90).result(10).status == "accepted"
    [segment] = (tmp_path / "ledger.db-intake").glob("*.seg")
    assert gzipped in segment.read_bytes()  # what the agent sent, not the inflated JSON
    assert [body for _, body in first.ledger.pending_batches()] == [msgspec.json.encode(sent)]
    first.ledger.close()  # dies before any tick
    second = open_core(db, T0 + 90)
    assert second.service.health().pending_samples == 10
    second.applier.tick(flush=True)
    assert energy(second) == WATTS * 90
    second.ledger.close()


def test_evaluation_runs_once_per_interval_of_event_time(core: CollectorCore) -> None:
    interval = core.recommender.analysis.evaluation_interval_seconds
    ingest(core, batch(1, range(0, 3600, 10), sm=0.0))  # idle past the 30 min window
    core.applier.tick(flush=True)
    opened = core.recommender.evaluate_if_due(T0 + 3590)
    assert [r.id for r in opened] == [f"release_idle:{POD.key}"]
    assert core.recommender.evaluate_if_due(T0 + 3590 + interval - 1) == []  # not due: not run
    assert (
        core.recommender.evaluate_if_due(T0 + 3590 + interval)[0].updated_at == T0 + 3590 + interval
    )


def test_workloads_counts_an_open_idle_episode_once_and_only_in_its_range(
    core: CollectorCore,
) -> None:
    ingest(core, batch(1, range(0, 600, 10), sm=0.5))
    ingest(core, batch(2, range(600, 1200, 10), sm=0.0))  # idle from +600 s, still open
    core.applier.tick(flush=True)
    (now,) = core.service.workloads(T0, T0 + 1200)
    assert (now.idle_episodes, now.longest_idle_seconds) == (1, 590)
    (before,) = core.service.workloads(T0, T0 + 300)  # the episode began after this range
    assert (before.idle_episodes, before.longest_idle_seconds) == (0, 0.0)


def test_workloads_include_the_hour_a_range_starts_in(core: CollectorCore) -> None:
    """``usage`` sums the hourly rollups that *overlap* the range (collector/backend.py)."""
    ingest(core, batch(1, range(0, 610, 10)))
    core.applier.tick(flush=True)
    (report,) = core.service.workloads(T0 + 300, T0 + 600)
    assert report.usage.energy_joules == WATTS * 600  # hour granularity: the whole hour


def test_an_interval_across_hours_is_split_between_them_pro_rata(core: CollectorCore) -> None:
    """A sample 10 s before the hour and one 10 s after: 10 s and half the energy each side;
    a 2 h silence from +1.5 h (unknown, its counter delta real) is shared by three hours."""
    ingest(core, batch(1, [*range(3570, 3600, 10), *range(3610, 3640, 10)]))
    ingest(core, batch(2, [5400, 12600, 12610]))
    core.applier.tick(flush=True)

    def hour(n: int) -> tuple[float, float, float]:
        ((_, u),) = core.ledger.usage_by_gpu(T0 + n * 3600, T0 + (n + 1) * 3600)
        return u.active_seconds, u.unknown_seconds, u.energy_joules

    assert hour(0) == (30.0, 0.0, WATTS * 30)  # 3570..3600: two intervals and a half
    # 3600..3630 active; 3630..5400 and 5400..7200 unknown (gaps past stale_after)
    assert hour(1) == (30.0, 1770.0 + 1800.0, WATTS * 3600)
    assert hour(2) == (0.0, 3600.0, WATTS * 3600)
    assert hour(3) == (10.0, 1800.0, WATTS * 1810)
    assert energy(core) == WATTS * (12610 - 3570)


def test_an_episode_closed_while_a_report_is_built_counts_once(core: CollectorCore) -> None:
    """The service takes the open episodes under the fleet's lock, then reads the ledger; a tick
    in between may commit the same episode as closed."""
    ingest(core, batch(1, range(0, 600, 10), sm=0.0))
    core.applier.tick(flush=True)
    (still_open,) = core.fleet.open_episodes()
    ingest(core, batch(2, range(600, 700, 10), sm=0.5))
    core.applier.tick(flush=True)  # closes it at +600 s and commits it
    models = core.service.accountant.workload_models()
    period = ledger_period(T0, T0 + 700, T0 + 700)
    (report,) = reports.workload_reports(core.ledger, period, [still_open], models, "")
    assert (report.idle_episodes, report.longest_idle_seconds) == (1, 600)


@pytest.mark.parametrize(("shortest", "episodes"), [(60.0, 1), (0.0, 11)])
def test_short_idle_gaps_count_as_idle_seconds_but_not_as_episodes(
    tmp_path: Path, shortest: float, episodes: int
) -> None:
    """Bursty inference: ten 20 s idle gaps between requests, then 300 s idle. All 500 idle
    seconds count either way; with ``analysis.min_episode_seconds`` at its default (60 s)
    only the 300 s gap is an episode, with 0 every gap is."""
    sms = [0.5 if t % 30 == 0 else 0.0 for t in range(0, 300, 10)] + [0.5] + [0.0] * 30 + [0.5]
    samples = tuple(sample(t, sm) for t, sm in zip(range(0, 620, 10), sms, strict=True))
    b = msgspec.structs.replace(batch(1, range(0)), samples=samples)
    settings = CollectorSettings(analysis=AnalysisSettings(min_episode_seconds=shortest))
    p = CollectorCore.build(
        settings, Ledger.open(str(tmp_path / "l.db")), example_rates(), lambda: T0
    )
    try:
        ingest(p, b)
        p.applier.tick(flush=True)
        (report,) = p.service.workloads(T0, T0 + 620)
        assert report.usage.idle_seconds == 500.0
        assert report.idle_episodes == episodes
        assert report.longest_idle_seconds == 300.0
        assert len(p.ledger.idle_episodes(T0, T0 + 620)) == episodes
        # a 20 s gap still open at the last applied sample counts as the closed ones do
        ingest(p, batch(2, range(620, 650, 10), sm=0.0))
        p.applier.tick(flush=True)
        (report,) = p.service.workloads(T0, T0 + 650)
        assert report.idle_episodes == episodes + (shortest == 0.0)
    finally:
        p.ledger.close()


@pytest.mark.parametrize("value", ["-1", "inf", "soon"])
def test_a_bad_min_episode_seconds_is_refused_naming_the_key(tmp_path: Path, value: str) -> None:
    environ = {"GPUFLEET_ANALYSIS__MIN_EPISODE_SECONDS": value}
    # the message names the variable it came from, then the key
    prefix = r"^environment variable GPUFLEET_ANALYSIS__MIN_EPISODE_SECONDS: "
    with pytest.raises(ConfigError, match=prefix + r"analysis\.min_episode_seconds: ") as caught:
        load_settings(CollectorSettings, None, environ)
    assert value in str(caught.value)
    assert load_settings(CollectorSettings, None, {}).analysis.min_episode_seconds == 60.0


INFO_2 = GpuInfo(uuid="GPU-q", index=1, name="NVIDIA H100 80GB HBM3")


def two_gpu_batch(seq: int, times_p: range, times_q: range) -> Batch:
    samples = [sample(t, 0.5) for t in times_p] + [
        msgspec.structs.replace(sample(t, 0.5), gpu_uuid=INFO_2.uuid) for t in times_q
    ]
    return Batch(schema_version=SCHEMA_VERSION, node="n", agent_boot_id="boot-1", seq=seq,
                 sent_at=T0, gpus=(INFO, INFO_2), samples=tuple(samples))  # fmt: skip


def body_seq(body: bytes) -> int:
    return msgspec.json.decode(body, type=Batch).seq


def test_a_batch_stays_pending_until_every_gpu_in_it_has_applied_its_samples(
    core: CollectorCore,
) -> None:
    ingest(core, two_gpu_batch(1, range(0, 50, 10), range(0, 50, 10)))
    ingest(core, two_gpu_batch(2, range(50, 100, 10), range(50, 60, 10)))  # q: only 50
    core.applier.tick(commit=True)  # p: newest 90 -> 0..60 applied; q: newest 50 -> 0..20
    assert [body_seq(body) for _, body in core.ledger.pending_batches()] == [1, 2]
    ingest(core, two_gpu_batch(3, range(100, 110, 10), range(100, 110, 10)))
    core.applier.tick(commit=True)  # p: to 70; q: to 50 -> batch 1 done; 2 waits for p's 90
    assert [body_seq(body) for _, body in core.ledger.pending_batches()] == [2, 3]
    core.applier.tick(flush=True)
    assert core.ledger.pending_batches() == []
    assert energy(core) == 2 * WATTS * 100


def test_a_cursor_holding_a_full_sample_from_an_older_version_restores(tmp_path: Path) -> None:
    """Cursors used to store the whole last GpuSample; they now store only the fields the
    next interval needs, in the same format, so either kind restores."""
    db = tmp_path / "ledger.db"
    first = open_core(db, T0 + 3600)
    ingest(first, batch(1, range(0, 60, 10)))
    first.applier.tick(flush=True)
    full = msgspec.structs.replace(
        sample(50, 0.5), temperature_celsius=61.0, sm_clock_hertz=1.9e9, xid_errors=(79,)
    )
    cursor = first.ledger.cursors()[INFO.uuid]
    old = msgspec.structs.replace(cursor, last_sample=msgspec.json.encode(full))
    first.ledger.commit(LedgerWrite(cursors={INFO.uuid: old}))
    first.ledger.close()
    second = open_core(db, T0 + 3600)
    ingest(second, batch(2, range(60, 120, 10)))
    second.applier.tick(flush=True)
    assert energy(second) == WATTS * 110
    second.ledger.close()


def node_batch(node: int, seq: int) -> Batch:
    """Batch ``seq`` of node ``node``: its one GPU's 10 readings from T0 + 100 * seq."""
    info = msgspec.structs.replace(INFO, uuid=f"GPU-n{node}")
    samples = tuple(
        msgspec.structs.replace(sample(t, 0.5), gpu_uuid=info.uuid)
        for t in range(100 * seq, 100 * seq + 100, 10)
    )
    return Batch(schema_version=SCHEMA_VERSION, node=f"n{node}", agent_boot_id="boot-1",
                 seq=seq, sent_at=T0, gpus=(info,), samples=samples)  # fmt: skip


def test_concurrent_ingests_each_batch_once_even_when_sent_twice_at_once(
    core: CollectorCore,
) -> None:
    """8 callers at once, as the app's thread pool: every batch of 4 nodes goes out from two
    threads (an agent's resend racing the first try), so duplicates meet within a group."""
    nodes, seqs = 4, 12
    statuses: list[str] = []

    def send(node: int) -> None:
        statuses.extend(ingest(core, node_batch(node, seq)) for seq in range(seqs))

    threads = [threading.Thread(target=send, args=(n % nodes,)) for n in range(2 * nodes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30.0)
    assert sorted(statuses) == ["accepted"] * nodes * seqs + ["duplicate"] * nodes * seqs
    assert len(core.ledger.pending_batches()) == nodes * seqs
    core.applier.tick(flush=True)
    assert core.ledger.pending_batches() == []
    # each GPU: readings T0 .. T0 + 100 * seqs - 10, drawing WATTS throughout
    assert energy(core) == pytest.approx(nodes * WATTS * (100 * seqs - 10))
    counters = core.service.stats.snapshot()
    assert (counters.batches_accepted, counters.batches_duplicate) == (nodes * seqs,) * 2
    assert counters.samples_accepted == nodes * seqs * 10 and counters.late_samples == 0


PARENT = GpuInfo(uuid="GPU-mig", index=1, name="NVIDIA A100-SXM4-80GB", mig_enabled=True)
SLICES = [
    GpuInfo(
        uuid=f"MIG-{i}",
        index=1,
        name="NVIDIA A100-SXM4-80GB MIG 3g.40gb",
        mig_parent_uuid=PARENT.uuid,
        mig_profile="3g.40gb",
    )
    for i in range(3)
]
HOLDERS = [
    Workload(kind=WorkloadKind.KUBERNETES_POD, id=f"u{i}", name=f"w{i}", namespace="ml")
    for i in range(2)
]


def mig_batch(seq: int, times: range) -> Batch:
    """The parent reports the energy (WATTS); slice 0 (held by w0) runs at 0.6 SM, slice 1
    (w1) at 0.2, slice 2 (nobody) at 0.2: w0 gets 60 %, w1 20 %, 20 % stays unallocated."""
    samples: list[GpuSample] = []
    for t in times:
        samples.append(GpuSample(timestamp=T0 + t, gpu_uuid=PARENT.uuid, power_watts=WATTS,
                                 energy_joules=WATTS * t))  # fmt: skip
        for info, sm, held in zip(
            SLICES, (0.6, 0.2, 0.2), ((HOLDERS[0],), (HOLDERS[1],), ()), strict=True
        ):
            samples.append(GpuSample(timestamp=T0 + t, gpu_uuid=info.uuid, sm_activity=sm,
                                     dram_activity=sm, workloads=held))  # fmt: skip
    return Batch(schema_version=SCHEMA_VERSION, node="n", agent_boot_id="b", seq=seq,
                 sent_at=T0, gpus=(PARENT, *SLICES), samples=tuple(samples))  # fmt: skip


def test_a_mig_gpus_energy_goes_to_its_instances_holders_by_activity(core: CollectorCore) -> None:
    ingest(core, mig_batch(1, range(0, 610, 10)))
    core.applier.tick(flush=True)
    total = WATTS * 600
    by_workload = {ref.key: u.energy_joules for ref, u in core.ledger.usage_totals_by_workload()}
    assert by_workload == pytest.approx({"pod:ml/w0": 0.6 * total, "pod:ml/w1": 0.2 * total})
    assert energy(core) == pytest.approx(total)  # the GPU's own total is unchanged


def test_a_failed_commit_keeps_what_was_applied_and_the_next_commit_saves_it(
    tmp_path: Path,
) -> None:
    """The ledger refuses one commit (a trigger another connection put there): the samples
    it held are not lost in the running collector; the next commit carries them."""
    db = tmp_path / "ledger.db"
    core = open_core(db, T0 + 200)
    ingest(core, batch(1, range(0, 60, 10)))
    other = sqlite3.connect(db)
    other.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON cursors "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    )
    other.commit()
    core.applier.tick()  # the failure is reported, not raised: the job goes on
    health = core.service.health()
    assert not health.ready and not health.ledger_ok and "refused by the test" in health.detail
    assert health.write_path.commit_failures == {"other": 1}
    assert energy(core) == 0.0 and len(core.ledger.pending_batches()) == 1
    ingest(core, batch(2, range(60, 120, 10)))
    other.execute("DROP TRIGGER refuse")
    other.commit()
    other.close()
    core.applier.tick(flush=True)
    assert energy(core) == WATTS * 110 and core.ledger.pending_batches() == []
    assert core.service.health().ready
    core.ledger.close()


def test_submitted_bodies_are_checked_on_the_ingest_thread_and_a_refused_one_fails_alone(
    core: CollectorCore,
) -> None:
    """What the app hands over is the body as POSTed: decoded, validated and stored off
    the event loop; a malformed or invalid body in the same group gets its own 422."""
    seen: list[tuple[int, str]] = []
    core.observers.attach(Seen(seen))
    negative = msgspec.structs.replace(sample(70, 0.5), power_watts=-5.0)
    invalid = msgspec.structs.replace(batch(3, range(60, 70, 10)), samples=(negative,))
    futures = [
        core.service.submit(
            gzip.compress(msgspec.json.encode(batch(1, range(0, 60, 10)))), "gzip", T0
        ),
        core.service.submit(b'{"schema_version": 1, "node": ', None, T0),
        core.service.submit(msgspec.json.encode(invalid), None, T0),
        core.service.submit(msgspec.json.encode(batch(2, range(60, 120, 10))), None, T0),
        core.service.submit(msgspec.json.encode(batch(2, range(60, 120, 10))), None, T0),
    ]
    assert futures[0].result(10).status == "accepted"
    refused = ((futures[1], None, 0), (futures[2], "$.samples[0].power_watts", 1))
    for future, field, samples in refused:
        err = future.exception(10)
        assert isinstance(err, IngestError) and err.status == 422
        assert (err.field, err.samples) == (field, samples)
    assert [f.result(10).status for f in futures[3:]] == ["accepted", "duplicate"]
    assert seen == [(1, "gpufleet-ingest"), (2, "gpufleet-ingest")]  # not the duplicate
    core.applier.tick(flush=True)
    assert energy(core) == WATTS * 110
    core.close()


class Failing:
    """An observer that fails on everything it is told."""

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        raise RuntimeError("observer down")

    def write_committed(self, write: LedgerWrite) -> None:
        raise RuntimeError("observer down")


def test_a_failing_observer_fails_neither_the_ack_nor_the_commit_nor_the_others(
    core: CollectorCore, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[int, str]] = []
    core.observers.attach(Failing())
    core.observers.attach(Seen(seen))
    assert ingest(core, batch(1, range(0, 60, 10))) == "accepted"
    core.applier.tick(flush=True)
    assert [seq for seq, _ in seen] == [1]  # the one after the failing one was told
    assert energy(core) == WATTS * 50 and core.ledger.pending_batches() == []
    failures = [
        r.getMessage() for r in caplog.records if "observer Failing failed" in r.getMessage()
    ]
    assert failures == [
        "observer Failing failed on stored batches",
        "observer Failing failed on a commit",
    ]
