"""The batch log: acknowledged batches read back exactly after a restart, segments go once
applied, one process per log; and the ledger around it: applied batches stay applied across
a restart, a schema-3 ledger's pending rows move into the log. Damaged segments:
test_log_damage.py."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest

from collector.ledger.batch_log import BatchLog, BatchLogError, BatchRecord
from collector.ledger.schema import MIGRATIONS, migrate
from collector.ledger.store import Ledger, LedgerWrite

T0 = 1_767_225_600.0


def entry(seq: int, body: bytes = b"", node: str = "n1") -> BatchRecord:
    return BatchRecord(node, "boot-1", seq, T0 + seq, body or b'{"seq":%d}' % seq, seq % 7)


def test_what_was_appended_is_read_back_after_a_restart(tmp_path: Path) -> None:
    entries = [entry(1), entry(2, gzip.compress(b'{"x": 1}')), entry(3, node="nöde-ü")]
    log = BatchLog(tmp_path, sync=True)
    ids = log.append(entries[:2]) + log.append(entries[2:])
    log.close()
    again = BatchLog(tmp_path, sync=True)
    assert [(r.batch_id, r.entry) for r in again.found] == list(zip(ids, entries, strict=True))
    assert again.pending() == again.found
    assert ids == sorted(ids) and len(set(ids)) == 3


def seqs_found(directory: Path) -> list[int]:
    log = BatchLog(directory, sync=False)
    log.close()
    return [r.entry.seq for r in log.found]


def test_sync_zero_fills_each_segment_and_the_zeros_end_it(tmp_path: Path) -> None:
    log = BatchLog(tmp_path, sync=True, segment_bytes=1 << 20)
    log.append([entry(1)])
    [path] = tmp_path.glob("*.seg")
    assert path.stat().st_size == 1 << 20  # written once; each append overwrites blocks
    log.append([entry(2)])
    assert path.stat().st_size == 1 << 20
    log.close()
    assert seqs_found(tmp_path) == [1, 2]


def test_segments_go_once_every_batch_in_them_is_done(tmp_path: Path) -> None:
    log = BatchLog(tmp_path, sync=False, segment_bytes=100)
    ids = [log.append([entry(seq)])[0] for seq in range(1, 7)]
    segments = log.segments()
    assert len(segments) == 6 and [i >> 32 for i in ids] == segments  # 61 bytes a record
    assert log.mark_done(ids[1:3]) == segments[1:3]
    assert log.mark_done(ids[5:]) == []  # the segment being written stays
    assert [r.entry.seq for r in log.pending()] == [1, 4, 5]
    assert sorted(p.name for p in tmp_path.glob("*.seg")) == [
        f"{n:010d}.seg" for n in (segments[0], segments[3], segments[4], segments[5])
    ]


def test_a_restart_writes_a_new_segment_and_one_process_holds_the_log(tmp_path: Path) -> None:
    log = BatchLog(tmp_path, sync=False)
    [first] = log.append([entry(1)])
    with pytest.raises(BatchLogError, match="in use by another collector process"):
        BatchLog(tmp_path, sync=False)
    log.close()
    again = BatchLog(tmp_path, sync=False)
    [second] = again.append([entry(2)])
    assert second >> 32 == (first >> 32) + 1
    assert again.mark_done([first]) == [first >> 32]
    assert [r.entry.seq for r in again.pending()] == [2]


def done_rows(ledger: Ledger) -> list[int]:
    return [r[0] for r in ledger.read(lambda c: c.execute("SELECT * FROM intake_done").fetchall())]


def test_applied_batches_are_not_replayed_and_their_segments_go(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.db")
    ledger = Ledger.open(path, synchronous="NORMAL")
    a, b, c = (ledger.record_batch("n1", "boot", s, T0, b'{"s":%d}' % s, 1) for s in (1, 2, 3))
    assert a is not None and b is not None and c is not None
    ledger.commit(LedgerWrite(batches_done=[a, c]))
    assert done_rows(ledger) == [a, c]
    ledger.close()  # as after a crash: no clean shutdown writes anything
    ledger = Ledger.open(path, synchronous="NORMAL")
    assert ledger.pending_batches() == [(b, b'{"s":2}')]
    assert ledger.record_batch("n1", "boot", 2, T0, b"{}", 1) is None  # still acknowledged
    [d] = [ledger.record_batch("n1", "boot", 4, T0, b'{"s":4}', 1)]
    assert d is not None and d >> 32 == (a >> 32) + 1  # a new segment
    ledger.commit(LedgerWrite(batches_done=[b]))
    assert [p.name for p in (tmp_path / "ledger.db-intake").glob("*.seg")] == [
        f"{d >> 32:010d}.seg"
    ]
    ledger.commit(LedgerWrite())  # the next commit forgets the deleted segment's ids
    assert done_rows(ledger) == []
    assert ledger.pending_batches() == [(d, b'{"s":4}')]
    ledger.close()


def test_a_schema_3_ledger_s_pending_rows_move_into_the_log(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:3])
    bodies = [b'{"s":1}', gzip.compress(b'{"s":2}')]
    conn.executemany(
        "INSERT INTO pending_batches (received_at, sample_count, body) VALUES (?, 1, ?)",
        [(T0, body) for body in bodies],
    )
    conn.execute("INSERT INTO ack_ranges VALUES ('n1', 'boot', 1, 2, ?)", (T0,))
    conn.close()
    with Ledger.open(str(path)) as ledger:
        assert [body for _, body in ledger.pending_batches()] == [b'{"s":1}', b'{"s":2}']
        left = ledger.read(lambda c: c.execute("SELECT COUNT(*) FROM pending_batches").fetchone())
        assert left == (0,)
        assert ledger.record_batch("n1", "boot", 2, T0, b"{}", 1) is None  # acks as they were
    with Ledger.open(str(path)) as ledger:  # moved once: not adopted again
        assert len(ledger.pending_batches()) == 2
