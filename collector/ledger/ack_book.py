"""Which batches the collector has acknowledged: per (node, agent boot), ranges of seqs.

An agent sends its seqs in order, so a boot's acks are one range that grows by one per
batch; a seq never sent (a batch the agent dropped) leaves a gap, and one arriving late fills
it, merging the ranges on either side. The book lives in memory, so checking and adding an
ack costs no SQL; the streams it changed are written to the ledger's ``ack_ranges`` table
with the next commit (``take_dirty``). Until then the acks are durable in the batch log,
which holds each acknowledged batch until its samples are applied and committed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collector.ledger.sql import Connection

Stream = tuple[str, str]  # (node, agent_boot_id)


@dataclass(slots=True)
class _Range:
    """Seqs ``first``..``last`` acknowledged, the newest at ``received_at``."""

    first: int
    last: int
    received_at: float


def _first(r: _Range) -> int:
    return r.first


class AckBook:
    def __init__(self, rows: Iterable[tuple[str, str, int, int, float]] = ()) -> None:
        """``rows``: (node, boot_id, first_seq, last_seq, received_at), as ``ack_ranges``."""
        self._streams: dict[Stream, list[_Range]] = {}
        self._dirty: set[Stream] = set()
        for node, boot, first, last, at in rows:
            self._streams.setdefault((node, boot), []).append(_Range(first, last, at))
        for ranges in self._streams.values():
            ranges.sort(key=_first)

    def holds(self, node: str, boot: str, seq: int) -> bool:
        ranges = self._streams.get((node, boot))
        if not ranges:
            return False
        i = bisect.bisect_right(ranges, seq, key=_first)
        return i > 0 and ranges[i - 1].last >= seq

    def add(self, node: str, boot: str, seq: int, at: float) -> None:
        """Record ``seq`` (not held yet) acknowledged at ``at``."""
        stream = (node, boot)
        ranges = self._streams.setdefault(stream, [])
        self._dirty.add(stream)
        i = bisect.bisect_right(ranges, seq, key=_first)
        below = ranges[i - 1] if i > 0 and ranges[i - 1].last == seq - 1 else None
        above = ranges[i] if i < len(ranges) and ranges[i].first == seq + 1 else None
        if below is not None and above is not None:  # a late seq closes a gap
            below.last = above.last
            below.received_at = max(below.received_at, above.received_at, at)
            del ranges[i]
        elif below is not None:  # the usual ack: the next seq
            below.last, below.received_at = seq, max(below.received_at, at)
        elif above is not None:
            above.first, above.received_at = seq, max(above.received_at, at)
        else:
            ranges.insert(i, _Range(seq, seq, at))

    def prune(self, cutoff: float) -> None:
        """Forget ranges whose newest ack is older than ``cutoff`` (as the ledger's prune)."""
        for stream, ranges in list(self._streams.items()):
            kept = [r for r in ranges if r.received_at >= cutoff]
            if len(kept) != len(ranges):
                self._dirty.add(stream)
                if kept:
                    self._streams[stream] = kept
                else:
                    del self._streams[stream]

    def take_dirty(self) -> dict[Stream, list[tuple[int, int, float]]]:
        """The ranges of every stream changed since the last call (empty: all gone), to be
        written with ``save_streams``; ``restore_dirty`` them if that write fails."""
        dirty, self._dirty = self._dirty, set()
        return {
            s: [(r.first, r.last, r.received_at) for r in self._streams.get(s, ())] for s in dirty
        }

    def restore_dirty(self, streams: Iterable[Stream]) -> None:
        self._dirty.update(streams)


def save_streams(conn: Connection, streams: Mapping[Stream, list[tuple[int, int, float]]]) -> None:
    """Replace each stream's rows in ``ack_ranges`` with its ranges now."""
    conn.executemany("DELETE FROM ack_ranges WHERE node = ? AND boot_id = ?", list(streams))
    conn.executemany(
        "INSERT INTO ack_ranges VALUES (?, ?, ?, ?, ?)",
        [(*stream, *r) for stream, ranges in streams.items() for r in ranges],
    )


def load_rows(conn: Connection) -> list[tuple[str, str, int, int, float]]:
    sql = "SELECT node, boot_id, first_seq, last_seq, received_at FROM ack_ranges"
    return conn.execute(sql).fetchall()
