"""The batch log's record format: how a batch is framed in a segment, and how a segment is
read back when some of it is damaged.

A segment (batch_log.py) is a run of records::

    header  <4sIIQ: magic b"GFB1", payload length, CRC-32 of (batch id, payload), batch id
    payload <qdIHH: seq, received_at, sample_count, len(node), len(boot_id); node; boot_id; body

A record checks out when its magic, its segment number (the batch id's high half), a length
that fits and its CRC all do. The CRC covers the payload as far as the length says, so a
damaged length fails it too: reading never trusts a length it has not checked, and never
steps from a damaged record by its length. Instead it resynchronises: it searches forward
for the next magic at which a record checks out (``bytes.find``, not a byte-by-byte walk;
a false start must also pass the CRC, odds 2^-32). So damage costs the records it touches
and no others, as Prometheus's WAL reader skips a corrupt record.

Whatever lies between the last record that checks out and the next is reported as
``Damage``. Past the segment's last non-zero byte is its unused tail (a ``sync`` segment is
zero-filled when created), which is no damage; a record cut short before it is
(``Damage.cut``): a write a crash interrupted (never acknowledged), or lost data.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

MAGIC = b"GFB1"
_HEADER = struct.Struct("<4sIIQ")
_META = struct.Struct("<qdIHH")
_ID = struct.Struct("<Q")


class BatchRecord(NamedTuple):
    """One batch to acknowledge: its identity, arrival time, body (the JSON, gzip-compressed
    or not) and sample count."""

    node: str
    boot_id: str
    seq: int
    received_at: float
    body: bytes
    sample_count: int


class LoggedBatch(NamedTuple):
    """A batch as the log holds it: the id ``append`` gave it, and what was appended."""

    batch_id: int
    entry: BatchRecord


class Damage(NamedTuple):
    """Bytes ``offset``..``end`` of a segment in which no record checks out. ``records``:
    how many batches were lost with them (the magics in them, at least one); ``cut``: they
    run to the end of the segment's data, a record cut short."""

    offset: int
    end: int
    records: int
    cut: bool


class SegmentContents(NamedTuple):
    records: list[LoggedBatch]
    damage: list[Damage]


def frame(batch_id: int, e: BatchRecord) -> bytes:
    """``e`` as one record of segment ``batch_id >> 32``."""
    node, boot = e.node.encode(), e.boot_id.encode()
    meta = _META.pack(e.seq, e.received_at, e.sample_count, len(node), len(boot))
    payload = b"".join((meta, node, boot, e.body))
    crc = zlib.crc32(payload, zlib.crc32(_ID.pack(batch_id)))
    return _HEADER.pack(MAGIC, len(payload), crc, batch_id) + payload


def parse(data: bytes, number: int) -> SegmentContents:
    """Every record of segment ``number`` that checks out, in order, and the damage
    between them."""
    records: list[LoggedBatch] = []
    damage: list[Damage] = []
    used = len(data.rstrip(b"\0"))  # past it: the unused tail
    view, pos = memoryview(data), 0
    while pos < used:
        found = _record_at(data, view, pos, number)
        if found is not None:
            records.append(found[0])
            pos = found[1]
            continue
        after = _next_record(data, view, pos + 1, number, used)
        end = used if after is None else after
        damage.append(Damage(pos, end, max(1, data.count(MAGIC, pos, end)), after is None))
        pos = end
    return SegmentContents(records, damage)


def _next_record(data: bytes, view: memoryview, start: int, number: int, used: int) -> int | None:
    """The offset of the first record from ``start`` on that checks out, if any."""
    while (at := data.find(MAGIC, start, used)) >= 0:
        if _record_at(data, view, at, number) is not None:
            return at
        start = at + 1
    return None


def _record_at(
    data: bytes, view: memoryview, pos: int, number: int
) -> tuple[LoggedBatch, int] | None:
    """The record at ``pos`` and the offset after it, or None where none checks out."""
    if pos + _HEADER.size > len(data):
        return None
    magic, length, crc, bid = _HEADER.unpack_from(data, pos)
    start, end = pos + _HEADER.size, pos + _HEADER.size + length
    if magic != MAGIC or bid >> 32 != number or end > len(data) or length < _META.size:
        return None
    payload = view[start:end]
    if zlib.crc32(payload, zlib.crc32(_ID.pack(bid))) != crc:
        return None
    seq, at, count, node_len, boot_len = _META.unpack_from(payload)
    node_end = _META.size + node_len
    boot_end = node_end + boot_len
    entry = BatchRecord(
        bytes(payload[_META.size : node_end]).decode(),
        bytes(payload[node_end:boot_end]).decode(),
        seq,
        at,
        bytes(payload[boot_end:]),
        count,
    )
    return LoggedBatch(bid, entry), end
