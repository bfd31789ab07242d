"""A damaged batch log segment costs exactly the damaged record, loudly.

Five batches are acknowledged through a real ledger (so their acks are in the batch log
only: no commit has written ``ack_ranges``), the process "dies", one bit of one record is
flipped, or the segment is cut or zeroed from some point, and the ledger is opened again.
Every other batch must be pending again with its ack (a resend is a duplicate), the
damaged one must be gone with its ack (its resend is accepted: the agent's copy is the one
left), and the damage must be logged as an ERROR naming the segment and byte offset and
counted. Offsets come from the record format as documented (log_records.py), not from
its code.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import NamedTuple

import pytest

from collector.ledger.store import Ledger

T0 = 1_767_225_600.0
NODE, BOOT = "node-7", "boot-b1"
SEQS = [1, 2, 3, 4, 5]
#: header <4sIIQ (magic, length, crc, batch id), then meta <qdIHH, node, boot id, body
FIELDS = {
    "magic": 0, "length": 4, "crc": 8, "batch_id": 12, "seq": 20, "received_at": 28,
    "sample_count": 36, "node_len": 40, "boot_len": 42, "node": 44,
    "boot_id": 44 + len(NODE), "body": 44 + len(NODE) + len(BOOT) + 3,
}  # fmt: skip


def body(seq: int) -> bytes:
    return json.dumps({"seq": seq, "pad": "x" * (40 + seq)}).encode()


class Written(NamedTuple):
    db: Path
    segment: Path
    #: each record's (start, end) in the segment, by seq
    spans: dict[int, tuple[int, int]]


def write_five(tmp_path: Path, sync: bool) -> Written:
    db = tmp_path / "ledger.db"
    with Ledger.open(str(db), synchronous="FULL" if sync else "NORMAL") as ledger:
        for seq in SEQS:
            assert ledger.record_batch(NODE, BOOT, seq, T0 + seq, body(seq), 3) is not None
    [segment] = (tmp_path / "ledger.db-intake").glob("*.seg")
    spans, pos = {}, 0
    for seq in SEQS:
        end = pos + 44 + len(NODE) + len(BOOT) + len(body(seq))
        spans[seq], pos = (pos, end), end
    return Written(db, segment, spans)


def reopen(written: Written, sync: bool) -> tuple[list[int], int, dict[int, bool]]:
    """The seqs pending after a restart, the corrupt records counted, and for each seq
    whether a resend is answered as a duplicate."""
    with Ledger.open(str(written.db), synchronous="FULL" if sync else "NORMAL") as ledger:
        pending = [json.loads(b)["seq"] for _, b in ledger.pending_batches()]
        corrupt = ledger.intake_corrupt_records()
        duplicate = {
            s: ledger.record_batch(NODE, BOOT, s, T0 + s, body(s), 3) is None for s in SEQS
        }
    return pending, corrupt, duplicate


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def assert_lost_alone(
    lost: list[int], got: tuple[list[int], int, dict[int, bool]], corrupt: int | None = None
) -> None:
    pending, counted, duplicate = got
    assert pending == [s for s in SEQS if s not in lost]
    assert duplicate == {s: s not in lost for s in SEQS}
    assert counted == (len(lost) if corrupt is None else corrupt)


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "page-cache"])
@pytest.mark.parametrize("record", [1, 3, 5], ids=["first", "middle", "last"])
@pytest.mark.parametrize("where", [*FIELDS, "length_high_bit"])
def test_a_flipped_bit_loses_that_record_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sync: bool, record: int, where: str
) -> None:
    written = write_five(tmp_path, sync)
    start = written.spans[record][0]
    offset, bit = (start + 7, 0x80) if where == "length_high_bit" else (start + FIELDS[where], 4)
    data = bytearray(written.segment.read_bytes())
    data[offset] ^= bit
    written.segment.write_bytes(bytes(data))
    assert_lost_alone([record], reopen(written, sync))
    [error] = errors(caplog)
    assert f"{written.segment} at byte offset {start}" in error
    assert error.startswith("intake log: the last record") == (record == 5)


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "page-cache"])
@pytest.mark.parametrize("how", ["truncated", "zeroed"])
@pytest.mark.parametrize("where", ["header", "meta", "node", "body", "boundary"])
def test_a_segment_cut_inside_its_last_record_loses_that_record_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sync: bool, how: str, where: str
) -> None:
    """Cut (the file shortened) or zeroed from the cut on (a write torn in a zero-filled
    segment). Cut exactly at a record boundary, what follows is indistinguishable from a
    segment that ended there: no record is damaged, and none is reported."""
    written = write_five(tmp_path, sync)
    start, end = written.spans[5]
    cut = {"header": start + 9, "meta": start + 30, "node": start + 46, "body": end - 1,
           "boundary": start}[where]  # fmt: skip
    data = written.segment.read_bytes()
    kept = data[:cut] if how == "truncated" else data[:cut] + bytes(len(data) - cut)
    written.segment.write_bytes(kept)
    if where == "boundary":
        assert_lost_alone([5], reopen(written, sync), corrupt=0)
        assert errors(caplog) == []
        return
    assert_lost_alone([5], reopen(written, sync))
    [error] = errors(caplog)
    assert f"last record of segment {written.segment} at byte offset {start} does not" in error


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "page-cache"])
@pytest.mark.parametrize("how", ["two_flips", "zeroed_run"])
def test_damage_across_two_records_loses_those_two(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sync: bool, how: str
) -> None:
    """Records 2 and 3 damaged side by side: one run of damage, one ERROR. The count is of
    the records whose magic is still there, at least one a run: a zeroed run that takes
    record 3's header with it counts one."""
    written = write_five(tmp_path, sync)
    (start2, end2), (start3, _) = written.spans[2], written.spans[3]
    data = bytearray(written.segment.read_bytes())
    if how == "two_flips":
        data[start2 + FIELDS["body"]] ^= 1
        data[start3 + FIELDS["seq"]] ^= 1
    else:
        data[end2 - 10 : start3 + 30] = bytes(start3 + 30 - end2 + 10)
    written.segment.write_bytes(bytes(data))
    assert_lost_alone([2, 3], reopen(written, sync), corrupt=2 if how == "two_flips" else 1)
    [error] = errors(caplog)
    assert f"{written.segment} at byte offset {start2} is damaged" in error
    assert f"reading went on at byte offset {written.spans[4][0]}" in error


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "page-cache"])
def test_a_body_ending_in_zero_bytes_is_no_damage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sync: bool
) -> None:
    """A gzip body ends in its length, little-endian: zero bytes, like the unused tail."""
    db = tmp_path / "ledger.db"
    mode = "FULL" if sync else "NORMAL"
    bodies = [b'{"gzip-like": 1}' + b"\0" * n for n in (1, 4)]
    with Ledger.open(str(db), synchronous=mode) as ledger:
        for seq, raw in enumerate(bodies, 1):
            assert ledger.record_batch(NODE, BOOT, seq, T0, raw, 1) is not None
    with Ledger.open(str(db), synchronous=mode) as ledger:
        assert len(ledger.pending_batches()) == 2
        assert ledger.intake_corrupt_records() == 0
    assert errors(caplog) == []
