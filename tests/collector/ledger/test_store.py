"""The ledger against real SQLite files and a real PostgreSQL (``ledger_url``, conftest.py):
acks, deltas, queries, migrations, retention. Tests of the SQLite file itself say so."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.actions.answer_log import AnswerLog, AnswerRecord
from collector.ledger.schema import MIGRATIONS, USAGE_COLUMNS
from collector.ledger.store import (
    BatchRecord,
    GpuCursor,
    GpuRecord,
    Ledger,
    LedgerError,
    LedgerWrite,
    WorkloadStatsDelta,
    sqlite_path,
)
from collector.records import HOUR_SECONDS, IdleEpisode, ModelUsage, Usage, WorkloadRef

T0 = 1_700_000_000.0 - 1_700_000_000.0 % HOUR_SECONDS  # an hour boundary
DAY = 24 * HOUR_SECONDS


def gpu(uuid: str, node: str = "n1", model: str = "H100") -> GpuRecord:
    return GpuRecord(
        uuid=uuid,
        node=node,
        model=model,
        name=f"NVIDIA {model}",
        index=0,
        first_seen=T0,
        last_seen=T0,
    )


POD = WorkloadRef(key="pod:ml/a", kind="kubernetes_pod", name="a", namespace="ml", team="t1")
JOB = WorkloadRef(key="slurm:7", kind="slurm_job", name="7", namespace="hpc", team="t2")


def registered(ledger: Ledger) -> None:
    write = LedgerWrite()
    write.gpus = {g.uuid: g for g in (gpu("G1"), gpu("G2", node="n2", model="A100"))}
    write.workloads = {POD.key: POD, JOB.key: JOB}
    ledger.commit(write)


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    opened = Ledger.open(ledger_url)
    registered(opened)
    yield opened
    opened.close()


def test_url_forms(tmp_path: Path) -> None:
    """SQLite's URL forms; a PostgreSQL URL names no file."""
    assert sqlite_path("sqlite:////var/x.db") == "/var/x.db"
    assert sqlite_path("sqlite:///x.db") == "x.db"
    assert sqlite_path(":memory:") == ":memory:"
    with pytest.raises(LedgerError, match="PostgreSQL"):
        sqlite_path("postgresql://db/gpufleet")
    with pytest.raises(LedgerError, match="cannot open"):
        Ledger.open(str(tmp_path / "missing-dir" / "x.db"))
    memory = Ledger.open(":memory:")
    registered(memory)
    assert [g.uuid for g in memory.gpus()] == ["G1", "G2"]
    memory.close()


def test_new_file_is_wal_at_latest_version(tmp_path: Path) -> None:
    """SQLite only: the file's journal mode and columns."""
    Ledger.open(f"sqlite:///{tmp_path}/a.db").close()
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
    hourly = [r[1] for r in conn.execute("PRAGMA table_info(gpu_usage_hourly)")]
    assert hourly[2:] == list(Usage.__struct_fields__) == list(USAGE_COLUMNS)


def test_newer_schema_is_refused(ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger, ledger.write_transaction() as conn:
        conn.execute("UPDATE schema_version SET version = version + 1")
    with pytest.raises(LedgerError, match="newer than this gpufleet"):
        Ledger.open(ledger_url)


def test_failed_migration_leaves_old_version(tmp_path: Path) -> None:
    """SQLite's migration runner (PostgreSQL's runs the same versions: postgres.migrate)."""
    from collector.ledger.schema import migrate

    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    current = len(MIGRATIONS)
    assert migrate(conn, MIGRATIONS) == current
    with pytest.raises(LedgerError, match=f"version {current + 1}"):
        migrate(conn, (*MIGRATIONS, "CREATE TABLE extra (x); CREATE TABLE gpus (y);"))
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(current,)]
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'extra'").fetchall() == []
    assert migrate(conn, (*MIGRATIONS, "CREATE TABLE extra (x);")) == current + 1


def test_duplicate_batch_is_refused_and_body_kept(ledger: Ledger) -> None:
    first = ledger.record_batch("n1", "boot", 1, T0, b'{"a":1}', 3)
    assert first is not None
    assert ledger.record_batch("n1", "boot", 1, T0 + 5, b'{"a":2}', 3) is None
    second = ledger.record_batch("n1", "boot2", 1, T0, b'{"b":1}', 1)  # new boot, same seq
    assert second is not None and second > first
    assert ledger.pending_batches() == [(first, b'{"a":1}'), (second, b'{"b":1}')]
    ledger.commit(LedgerWrite(batches_done=[first]))
    assert ledger.pending_batches() == [(second, b'{"b":1}')]
    assert ledger.record_batch("n1", "boot", 1, T0, b'{"a":1}', 3) is None  # still acked


def test_two_commits_to_one_hour_add_up(ledger: Ledger) -> None:
    for active, joules in ((10.0, 100.0), (5.0, 50.0)):
        ledger.commit(
            LedgerWrite(
                gpu_usage={(T0, "G1"): Usage(active_seconds=active, energy_joules=joules)},
                workload_usage={(T0, POD.key): Usage(active_seconds=active, cost=active)},
            )
        )
    [(record, usage)] = ledger.usage_by_gpu(T0, T0 + HOUR_SECONDS)
    assert record.uuid == "G1" and usage == Usage(active_seconds=15.0, energy_joules=150.0)
    [(ref, wl)] = ledger.usage_by_workload(T0, T0 + HOUR_SECONDS)
    assert ref == POD and wl == Usage(active_seconds=15.0, cost=15.0)
    assert ledger.usage_totals_by_gpu()[0][1] == usage


def test_commit_is_all_or_nothing(ledger: Ledger) -> None:
    bad = LedgerWrite(
        gpu_usage={(T0, "G1"): Usage(active_seconds=1.0), (T0, "unregistered"): Usage()},
        batches_done=[],
    )
    with pytest.raises(LedgerError, match=r"(?i)foreign key"):
        ledger.commit(bad)
    assert ledger.usage_by_gpu(T0, T0 + DAY) == []
    assert ledger.usage_totals_by_gpu() == []


def test_queries_respect_hour_ranges_and_groups(ledger: Ledger) -> None:
    write = LedgerWrite()
    for hour in range(4):
        start = T0 + hour * HOUR_SECONDS
        write.gpu_usage[(start, "G1")] = Usage(active_seconds=1.0 + hour)
        write.gpu_usage[(start, "G2")] = Usage(idle_seconds=10.0, allocated_idle_seconds=4.0)
        write.workload_usage[(start, POD.key)] = Usage(idle_cost=1.0)
        write.workload_usage[(start, JOB.key)] = Usage(idle_cost=2.0)
    ledger.commit(write)
    hours_1_2 = (T0 + HOUR_SECONDS, T0 + 3 * HOUR_SECONDS)
    by_gpu = {r.uuid: u for r, u in ledger.usage_by_gpu(*hours_1_2)}
    assert by_gpu["G1"].active_seconds == 2.0 + 3.0
    assert by_gpu["G2"].idle_seconds == 20.0
    assert ledger.usage_by_group(*hours_1_2, "namespace") == [
        ("hpc", Usage(idle_cost=4.0)),
        ("ml", Usage(idle_cost=2.0)),
    ]
    assert [(k, u.idle_seconds) for k, u in ledger.usage_by_group(*hours_1_2, "node")] == [
        ("n1", 0.0),
        ("n2", 20.0),
    ]
    assert ledger.model_usage(*hours_1_2) == [
        ModelUsage(
            model="A100",
            node="n2",
            gpu_count=1,
            observed_seconds=20.0,
            allocated_seconds=8.0,
            active_seconds=0.0,
        ),
        ModelUsage(
            model="H100",
            node="n1",
            gpu_count=1,
            observed_seconds=5.0,
            allocated_seconds=5.0,
            active_seconds=5.0,
        ),
    ]
    assert ledger.usage_by_gpu(T0 + 4 * HOUR_SECONDS, T0 + DAY) == []


def test_idle_episodes_closed_and_open(ledger: Ledger) -> None:
    closed = [
        IdleEpisode("G1", "n1", T0, T0 + 100, POD.key),
        IdleEpisode("G2", "n2", T0 + 50, T0 + 60, None),
        IdleEpisode("G1", "n1", T0 + 500, T0 + 900, None),
    ]
    cursor = GpuCursor(
        "G2", T0 + 1000, b"{}", open_episode_start=T0 + 800, open_episode_workload=JOB.key
    )
    ledger.commit(LedgerWrite(episodes_closed=closed, cursors={"G2": cursor}))
    assert ledger.idle_episodes(T0 + 55, T0 + 600) == [closed[0], closed[1], closed[2]]
    assert ledger.idle_episodes(T0 + 100, T0 + 850) == [closed[2]]
    assert ledger.idle_episodes(T0 + 100, T0 + 850, include_open=True) == [
        closed[2],
        IdleEpisode("G2", "n2", T0 + 800, None, JOB.key),
    ]
    assert ledger.idle_episodes(T0, T0 + 1000, gpu_uuid="G1") == [closed[0], closed[2]]
    assert ledger.idle_episodes(T0, T0 + 1000, workload_key=POD.key) == [closed[0]]
    assert ledger.idle_episodes(T0, T0 + 700, workload_key=JOB.key, include_open=True) == []
    assert ledger.cursors() == {"G2": cursor}


def test_prune_keeps_totals_and_recent_rows(ledger: Ledger) -> None:
    old, recent = T0, T0 + 10 * DAY
    ledger.commit(
        LedgerWrite(
            gpu_usage={
                (old, "G1"): Usage(energy_joules=7.0),
                (recent, "G1"): Usage(energy_joules=3.0),
            },
            workload_usage={(old, POD.key): Usage(cost=2.0)},
            episodes_closed=[IdleEpisode("G1", "n1", old, old + 60, None)],
        )
    )
    ledger.record_batch("n1", "boot", 1, old, b"{}", 0)
    ledger.commit(LedgerWrite())  # the ack reaches ack_ranges with a commit
    removed = ledger.prune(now=recent + HOUR_SECONDS, retention_days=5)
    # the old GPU hour, the old workload hour and its day (V5), the old episode
    assert removed == 4
    assert [u.energy_joules for _, u in ledger.usage_by_gpu(0, recent + DAY)] == [3.0]
    assert ledger.usage_totals_by_gpu()[0][1].energy_joules == 10.0
    assert ledger.usage_totals_by_workload()[0][1].cost == 2.0
    assert ledger.idle_episodes(0, recent + DAY) == []
    assert ledger.record_batch("n1", "boot", 1, old, b"{}", 0) is None  # ack kept (< 14 days)
    assert ledger.prune(now=old + 15 * DAY, retention_days=400) == 1  # now the ack goes


def test_registries_upsert_and_survive_reopen(ledger_url: str) -> None:
    path = ledger_url
    with Ledger.open(path) as ledger:
        registered(ledger)
        moved = GpuRecord("G1", "n9", "H100", "NVIDIA H100", 3, T0 + 99, T0 + 99, b'{"uuid":"G1"}')
        ledger.commit(LedgerWrite(gpus={"G1": moved}))
    with Ledger.open(path) as ledger:
        g1 = {g.uuid: g for g in ledger.gpus()}["G1"]
    assert (g1.node, g1.index, g1.first_seen, g1.last_seen) == ("n9", 3, T0, T0 + 99)
    assert g1.info_json == b'{"uuid":"G1"}'


def test_workload_profiles_merge_commits(ledger: Ledger) -> None:
    for memory_gib in (10, 20, 30, 40):
        stats = WorkloadStatsDelta(gpu_model="H100", gpu_count=2, last_seen=T0)
        for _ in range(5):
            stats.observe(1.0, memory_gib * 2**30, memory_gib / 100)
        ledger.commit(LedgerWrite(workload_stats={POD.key: stats}))
    [profile] = ledger.workload_profiles(now=T0 + 60)
    assert profile.workload == POD and (profile.gpu_model, profile.gpu_count) == ("H100", 2)
    assert profile.observed_seconds == 20.0
    assert profile.memory_peak_bytes == 40 * 2**30 and profile.sm_activity_peak == 0.4
    assert profile.memory_p95_bytes == 40 * 2**30  # nearest rank 19 of 20, clipped to peak
    assert profile.sm_activity_p95 == pytest.approx(0.4, rel=0.04)
    assert ledger.workload_profiles(now=T0 + 2 * DAY) == []  # not seen within a day


def test_garbage_file_is_a_ledger_error(tmp_path: Path) -> None:
    """SQLite only: a file that is not a database."""
    path = tmp_path / "not-a-db"
    path.write_bytes(b"hello, this is not SQLite" * 100)
    with pytest.raises(LedgerError, match="not-a-db"):
        Ledger.open(str(path))


def test_reads_from_another_thread_see_whole_commits(ledger: Ledger) -> None:
    seen: list[float] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(100):
                totals = ledger.usage_totals_by_gpu()
                seen.append(sum(u.active_seconds for _, u in totals))
        except BaseException as err:  # surfaced below, in the test's thread
            errors.append(err)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(50):  # each commit adds 3 s to G1 and G2 together
        ledger.commit(
            LedgerWrite(
                gpu_usage={
                    (T0 + i * HOUR_SECONDS, "G1"): Usage(active_seconds=1.0),
                    (T0 + i * HOUR_SECONDS, "G2"): Usage(active_seconds=2.0),
                }
            )
        )
    reader.join()
    assert errors == []
    assert all(total % 3 == 0 for total in seen)
    assert seen == sorted(seen)


def test_record_batches_acks_a_group_in_one_go_and_a_repeat_inside_it_once(
    ledger: Ledger,
) -> None:
    before = ledger.record_batch("n1", "boot", 1, T0, b'{"s":1}', 1)
    group = [
        BatchRecord("n1", "boot", 2, T0, b'{"s":2}', 1),
        BatchRecord("n1", "boot", 1, T0, b'{"s":1}', 1),  # acked before
        BatchRecord("n2", "boot", 2, T0, b'{"n2":2}', 4),
        BatchRecord("n1", "boot", 2, T0 + 1, b'{"s":2}', 1),  # twice in one group
    ]
    ids = ledger.record_batches(group)
    assert ids[1] is None and ids[3] is None
    assert before is not None and ids[0] is not None and ids[2] is not None
    assert before < ids[0] < ids[2]
    assert ledger.pending_batches() == [
        (before, b'{"s":1}'),
        (ids[0], b'{"s":2}'),
        (ids[2], b'{"n2":2}'),
    ]
    assert ledger.record_batches([]) == []


def test_a_failed_group_acks_none_of_its_batches(tmp_path: Path) -> None:
    """SQLite only: the batch log cannot create its segment."""
    intake = tmp_path / "ledger.db-intake"
    (intake / "0000000001.seg").mkdir(parents=True)  # where the first segment must go
    with Ledger.open(str(tmp_path / "ledger.db")) as ledger:
        group = [
            BatchRecord("n1", "boot", 1, T0, b"{}", 1),
            BatchRecord("n1", "boot", 2, T0, b"{}", 1),
        ]
        with pytest.raises(LedgerError, match=r"intake log: cannot create .*0000000001\.seg"):
            ledger.record_batches(group)
        assert ledger.pending_batches() == []
        # not acknowledged before; the log goes on in the next segment
        assert ledger.record_batches(group) == [2 << 32 | 1, 2 << 32 | 2]
        assert [body for _, body in ledger.pending_batches()] == [b"{}", b"{}"]


def test_prune_drops_answers_past_retention_but_not_a_keep_still_running(ledger: Ledger) -> None:
    answers = AnswerLog(ledger)
    old, recent = T0, T0 + 10 * DAY

    def answer(id_: str, at: float, kept_until: float | None = None) -> AnswerRecord:
        outcome = "kept" if kept_until is not None else "dismissed"
        return AnswerRecord(
            id_, at, "slack", "U1", "ana", "keep", "rec-1", POD.key, outcome, "", kept_until
        )

    answers.record(answer("old-dismiss", old))
    answers.record(answer("old-keep-long", old, kept_until=recent + DAY))  # still running
    answers.record(answer("old-keep-over", old, kept_until=old + 4 * HOUR_SECONDS))
    answers.record(answer("recent", recent))
    removed = ledger.prune(now=recent + HOUR_SECONDS, retention_days=5)
    assert removed == 2
    assert sorted(a.id for a in answers.answers()) == ["old-keep-long", "recent"]
    assert answers.kept_until(POD.key, recent) == recent + DAY


def test_quarantined_batches_are_counted_again_after_a_restart(ledger_url: str) -> None:
    """What health and ``gpufleet_collector_quarantined_batches`` report survives the
    process: SQLite keeps each batch in the quarantine folder, PostgreSQL in its intake
    row. Before: PostgreSQL's count began at 0 after every start, with the batch still
    set aside (the quarantine alert resolved by a restart)."""
    with Ledger.open(ledger_url) as ledger:
        ids = ledger.record_batches(
            [BatchRecord("n1", "boot", s, 100.0 + s, b'{"seq": %d}' % s, 3) for s in (1, 2)]
        )
        [first, _] = ledger.pending_records()
        assert first.batch_id == ids[0]
        ledger.quarantine(first, first.entry.body, "ValueError: out of range", 500.0)
        ledger.commit(LedgerWrite())
        assert ledger.quarantined().count == 1
    with Ledger.open(ledger_url) as reopened:
        summary = reopened.quarantined()
        assert summary.count == 1
        newest = summary.newest
        assert newest is not None
        assert (newest.node, newest.agent_boot_id, newest.seq) == ("n1", "boot", 1)
        assert (newest.received_at, newest.sample_count) == (101.0, 3)
        assert (newest.quarantined_at, newest.error) == (500.0, "ValueError: out of range")
        assert [p.entry.seq for p in reopened.pending_records()] == [2]


def test_a_quarantined_batch_s_message_says_where_it_is_and_that_a_resend_is_a_repeat(
    ledger_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The message an operator acts on. Before it said "fix and resend <id>.batch": a
    resend as it is was answered as a repeat of the acknowledged seq and never applied,
    and on PostgreSQL there was no such file."""
    with Ledger.open(ledger_url) as ledger:
        ledger.record_batches([BatchRecord("n1", "boot", 1, 101.0, b'{"seq": 1}', 3)])
        [pending] = ledger.pending_records()
        with caplog.at_level("ERROR", logger="collector.ledger.quarantine"):
            ledger.quarantine(pending, pending.entry.body, "ValueError: out of range", 500.0)
        ledger.commit(LedgerWrite())
        resent = ledger.record_batches([BatchRecord("n1", "boot", 1, 600.0, b'{"seq": 1}', 3)])
        assert resent == [None]  # a repeat of an acknowledged batch
        assert ledger.pending_records() == []
    [record] = [r for r in caplog.records if "quarantined" in r.getMessage()]
    message = record.getMessage()
    assert "ValueError: out of range" in message and "resend" not in message.replace(
        "a resend as it is counts as a repeat", ""
    )
    assert "a resend as it is counts as a repeat" in message
    if ledger_url.startswith("postgresql://"):
        assert f"intake_batches row {pending.batch_id}" in message
    else:
        assert f"quarantine/{pending.batch_id}.batch" in message
