"""Damage to the collector's intake log (collector/ledger/batch_log.py) as a disk does it:
one flipped bit, a file cut short.

The records are found by reading the on-disk format as that module's docstring gives it
(a ``<4sIIQ`` header: magic, payload length, CRC-32, batch id; then a ``<qdIHH`` payload
head: seq, received_at, sample count, node and boot id lengths), not through the module, so
the test holds the collector to what the format says.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"GFB1"
HEADER = struct.Struct("<4sIIQ")
META = struct.Struct("<qdIHH")


@dataclass(frozen=True)
class Record:
    """One record of a segment: where it starts and ends (bytes) and which batch it holds."""

    offset: int
    end: int
    node: str
    boot_id: str
    seq: int
    sample_count: int
    body: bytes


def records(segment: Path) -> list[Record]:
    """The segment's records in order, up to its zero-filled tail."""
    data = segment.read_bytes()
    out, pos = [], 0
    while pos + HEADER.size <= len(data):
        magic, length, _crc, _bid = HEADER.unpack_from(data, pos)
        if magic != MAGIC:
            break
        start = pos + HEADER.size
        seq, _at, count, node_len, boot_len = META.unpack_from(data, start)
        node_at = start + META.size
        boot_at = node_at + node_len
        body_at = boot_at + boot_len
        end = start + length
        node, boot = data[node_at:boot_at].decode(), data[boot_at:body_at].decode()
        out.append(Record(pos, end, node, boot, seq, count, data[body_at:end]))
        pos = end
    return out


def newest_segment(intake_dir: Path) -> Path:
    segments = sorted(p for p in intake_dir.glob("*.seg") if p.stem.isdigit())
    assert segments, f"no intake segment in {intake_dir}"
    return segments[-1]


def flip_bit(segment: Path, record: Record) -> int:
    """Flip one bit in the middle of ``record``'s body (what its CRC covers); the offset."""
    at = record.end - len(record.body) // 2 - 1
    with segment.open("r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x10]))
    return at


def truncate_within(segment: Path, record: Record) -> int:
    """Cut the file off half way through ``record``: it and all after it are gone."""
    at = record.offset + (record.end - record.offset) // 2
    with segment.open("r+b") as f:
        f.truncate(at)
    return at
