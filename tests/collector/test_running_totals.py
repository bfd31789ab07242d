"""The totals kept in memory equal a fresh read of the ledger after any sequence of commits,
whenever they were seeded; a re-render of /metrics after a commit reads none of them from
SQL."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.ledger.store import GpuRecord, Ledger, LedgerWrite, WorkloadStatsDelta
from collector.records import HOUR_SECONDS, Usage, WorkloadRef
from collector.reports import LedgerTotals, energy_totals, waste_totals
from collector.running_totals import RunningTotals
from tests.collector.metrics.test_cache import ENERGY, values, wired
from tests.collector.test_core import T0, WATTS, batch, energy, ingest, open_core

GPUS = ("GPU-c", "GPU-a", "GPU-b")  # not in (node, uuid) order
KEYS = ("slurm:7", "pod:ml/a", "pod:ml/b")
MODELS = ("", "H100", "A100")

_seconds = st.floats(0.0, 1e5, allow_nan=False)
_usage = st.builds(
    Usage,
    active_seconds=_seconds,
    idle_seconds=_seconds,
    allocated_idle_seconds=_seconds,
    energy_joules=_seconds,
    estimated_energy_joules=_seconds,
    idle_cost=_seconds,
    carbon_grams=_seconds,
)
_gpu = st.builds(
    GpuRecord,
    uuid=st.sampled_from(GPUS),
    node=st.sampled_from(("n2", "n1")),
    model=st.sampled_from(MODELS[1:]),
    name=st.just("NVIDIA"),
    index=st.integers(0, 3),
    first_seen=st.floats(T0, T0 + 1e4),
    last_seen=st.floats(T0, T0 + 1e4),
)
_workload = st.builds(
    WorkloadRef,
    key=st.sampled_from(KEYS),
    kind=st.just("kubernetes_pod"),
    name=st.sampled_from(("a", "b")),
    namespace=st.sampled_from(("ml", "hpc")),
    team=st.sampled_from(("", "t1")),
)
_stats = st.builds(
    WorkloadStatsDelta,
    observed_seconds=_seconds,
    gpu_model=st.sampled_from(MODELS),
    last_seen=st.floats(T0, T0 + 1e4),
)


@dataclass
class Commit:
    gpus: list[GpuRecord]
    workloads: list[WorkloadRef]
    gpu_usage: list[tuple[int, str, Usage]]
    workload_usage: list[tuple[int, str, Usage]]
    stats: dict[str, WorkloadStatsDelta]

    def write(self, gpus: set[str], workloads: set[str]) -> LedgerWrite:
        """The write, its deltas and stats limited to what is registered (the ledger's
        contract): ``gpus`` and ``workloads`` are the keys registered so far, updated."""
        gpus |= {g.uuid for g in self.gpus}
        workloads |= {w.key for w in self.workloads}
        write = LedgerWrite(gpus={g.uuid: g for g in self.gpus})
        write.workloads = {w.key: w for w in self.workloads}
        for hour, uuid, usage in self.gpu_usage:
            if uuid in gpus:
                _add(write.gpu_usage, (T0 + hour * HOUR_SECONDS, uuid), usage)
        for hour, key, usage in self.workload_usage:
            if key in workloads:
                _add(write.workload_usage, (T0 + hour * HOUR_SECONDS, key), usage)
        write.workload_stats = {k: s for k, s in self.stats.items() if k in workloads}
        return write


def _add(deltas: dict[tuple[float, str], Usage], key: tuple[float, str], usage: Usage) -> None:
    deltas.setdefault(key, Usage()).add(usage)


_commit = st.builds(
    Commit,
    gpus=st.lists(_gpu, max_size=3),
    workloads=st.lists(_workload, max_size=3),
    gpu_usage=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(GPUS), _usage), max_size=5),
    workload_usage=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(KEYS), _usage), max_size=4
    ),
    stats=st.dictionaries(st.sampled_from(KEYS), _stats, max_size=3),
)


@settings(max_examples=80, deadline=None)
@given(
    commits=st.lists(_commit, max_size=8),
    seeded_after=st.integers(0, 8),
    peeks=st.sets(st.integers(0, 7)),
)
def test_after_any_commits_the_totals_equal_a_fresh_ledger_read(
    commits: list[Commit], seeded_after: int, peeks: set[int]
) -> None:
    """Seeded after ``seeded_after`` commits (a restart: GPUs registered before it without
    totals are unknown to the seed), then told of the rest; a snapshot after each commit in
    ``peeks`` (a scrape between commits) equals the ledger then too."""
    ledger = Ledger.open(":memory:")
    totals: RunningTotals | None = None
    gpus: set[str] = set()
    workloads: set[str] = set()
    process_models = {KEYS[0]: "L4"}
    for n, commit in enumerate(commits):
        if n == seeded_after:
            totals = RunningTotals(ledger)
        write = commit.write(gpus, workloads)
        ledger.commit(write)
        if totals is not None:
            totals.write_committed(write)
            if n in peeks:
                assert totals.snapshot(process_models) == LedgerTotals.read(ledger, process_models)
    totals = totals or RunningTotals(ledger)
    expected = LedgerTotals.read(ledger, process_models)
    kept = totals.snapshot(process_models)
    assert kept == expected
    assert waste_totals(kept) == waste_totals(expected)
    assert energy_totals(kept) == energy_totals(expected)
    ledger.close()


def test_a_snapshot_is_not_changed_by_later_commits() -> None:
    ledger = Ledger.open(":memory:")
    gpu = GpuRecord("GPU-a", "n1", "H100", "NVIDIA H100", 0, T0, T0)
    ledger.commit(LedgerWrite(gpus={gpu.uuid: gpu}))
    totals = RunningTotals(ledger)
    write = LedgerWrite(gpu_usage={(T0, gpu.uuid): Usage(energy_joules=5.0)})
    ledger.commit(write)
    totals.write_committed(write)
    first = totals.snapshot({})
    ledger.commit(write)
    totals.write_committed(write)
    assert [u.energy_joules for _, u in first.by_gpu] == [5.0]
    assert [u.energy_joules for _, u in totals.snapshot({}).by_gpu] == [10.0]
    ledger.close()


def test_a_fold_that_fails_reads_the_totals_again_from_the_ledger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The ledger committed two GPUs' deltas; the fold is told a write it cannot add (a
    delta that is no Usage) after adding the first GPU's: the totals are read again and
    equal the ledger's, not half a commit."""
    ledger = Ledger.open(":memory:")
    gpus = [GpuRecord(f"GPU-{i}", "n1", "H100", "NVIDIA H100", i, T0, T0) for i in "ab"]
    ledger.commit(LedgerWrite(gpus={g.uuid: g for g in gpus}))
    totals = RunningTotals(ledger)
    good = {(T0, "GPU-a"): Usage(energy_joules=5.0), (T0, "GPU-b"): Usage(energy_joules=7.0)}
    ledger.commit(LedgerWrite(gpu_usage=good))
    broken = {(T0, "GPU-a"): Usage(energy_joules=5.0), (T0, "GPU-b"): None}
    totals.write_committed(LedgerWrite(gpu_usage=broken))  # type: ignore[arg-type]
    assert totals.snapshot({}) == LedgerTotals.read(ledger, {})
    assert [u.energy_joules for _, u in totals.snapshot({}).by_gpu] == [5.0, 7.0]
    assert [r.message for r in caplog.records if "could not be folded" in r.message]
    ledger.close()


def test_a_rerender_after_a_commit_reads_no_totals_from_sql(tmp_path: Path) -> None:
    core = open_core(tmp_path / "ledger.db", T0 + 200)
    _, client = wired(core)
    ingest(core, batch(1, range(0, 60, 10)))
    core.applier.tick(flush=True)
    client.get("/metrics")
    ingest(core, batch(2, range(60, 120, 10)))
    core.applier.tick(flush=True)  # a commit: the cached part is dropped
    seen: list[str] = []
    for conn in (core.ledger.engine._reader, core.ledger.engine._writer):
        conn.set_trace_callback(seen.append)
    after = client.get("/metrics").text
    for conn in (core.ledger.engine._reader, core.ledger.engine._writer):
        conn.set_trace_callback(None)
    assert sum(values(after, ENERGY).values()) == WATTS * 110 == energy(core)
    assert seen, "the fleet part still reads recommendations and pings the ledger"
    totals_tables = ("usage_total", "workload_stats", "FROM gpus", "FROM workloads")
    assert [s for s in seen if any(t in s for t in totals_tables)] == []
    core.close()
    core.ledger.close()


def test_the_totals_tables_survive_a_prune(tmp_path: Path) -> None:
    """A prune deletes old hourly rows; the totals kept in memory still equal the ledger's."""
    core = open_core(tmp_path / "ledger.db", T0 + 200)
    ingest(core, batch(1, range(0, 60, 10)))
    core.applier.tick(flush=True)
    assert core.ledger.prune(T0 + 90 * 24 * HOUR_SECONDS, retention_days=1) > 0
    kept = core.service.totals.snapshot({})
    assert kept == LedgerTotals.read(core.ledger, {})
    assert sum(u.energy_joules for _, u in kept.by_gpu) == WATTS * 50
    rows = sqlite3.connect(tmp_path / "ledger.db").execute("SELECT COUNT(*) FROM gpu_usage_hourly")
    assert rows.fetchone() == (0,)
    core.close()
    core.ledger.close()
