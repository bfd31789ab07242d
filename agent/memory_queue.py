"""Batches the spool could not store (disk full, read-only), held in memory instead.

They are sent like spooled batches, in the same oldest-first pass, for as long as they
wait; only a restart loses them. The queue is bounded by MAX_MEMORY_BATCHES and by the
spool's byte bound (the agent must not grow without limit on a node whose disk is gone):
past either the oldest is dropped, each one logged and counted. Not thread-safe: the
shipper's spool lock serialises access.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.model import Batch
from agent.shipping_log import ShippingLog
from agent.spool import gzip_batch
from agent.stats import AgentStats

#: the most batches held in memory (at the default 5 s interval: well over an hour)
MAX_MEMORY_BATCHES = 1000


class MemoryQueue:
    """Unspooled batches, oldest first, with their gzipped bodies."""

    def __init__(self, max_bytes: int, shipping_log: ShippingLog, stats: AgentStats) -> None:
        self._max_bytes = max_bytes
        self._log = shipping_log
        self._stats = stats
        self._bodies: dict[tuple[str, int], tuple[Batch, bytes]] = {}

    def add(self, batch: Batch) -> None:
        """Hold ``batch``; drop the oldest past the bounds."""
        self._bodies[_key(batch)] = (batch, gzip_batch(batch))
        self._enforce_bounds()

    def batches(self) -> list[Batch]:
        return [batch for batch, _ in self._bodies.values()]

    def body(self, batch: Batch) -> bytes | None:
        """The gzipped body of a held batch; None when it is no longer held."""
        held = self._bodies.get(_key(batch))
        return None if held is None else held[1]

    def remove(self, batch: Batch) -> None:
        self._bodies.pop(_key(batch), None)
        self._publish()

    def replace(self, batch: Batch, parts: Iterable[Batch]) -> list[Batch]:
        """Hold ``parts`` (the halves of a split) in the place of ``batch``."""
        held = list(self._bodies.values())
        at = next((i for i, (b, _) in enumerate(held) if _key(b) == _key(batch)), len(held))
        new = [(part, gzip_batch(part)) for part in parts]
        held[at : at + 1] = new
        self._bodies = {_key(b): (b, body) for b, body in held}
        self._enforce_bounds()
        return [part for part, _ in new if _key(part) in self._bodies]

    def lose_all(self, why: str) -> None:
        """Drop every held batch (shutdown), each logged and counted."""
        for batch, _ in list(self._bodies.values()):
            self._lose(batch, why)

    def _enforce_bounds(self) -> None:
        while self._bodies and (
            len(self._bodies) > MAX_MEMORY_BATCHES or self._bytes() > self._max_bytes
        ):
            oldest, _ = next(iter(self._bodies.values()))
            self._lose(oldest, "the spool cannot store batches and memory is full")
        self._publish()

    def _lose(self, batch: Batch, why: str) -> None:
        self._bodies.pop(_key(batch), None)
        self._log.lost(batch.agent_boot_id, batch.seq, len(batch.samples), why)
        self._publish()

    def _bytes(self) -> int:
        return sum(len(body) for _, body in self._bodies.values())

    def _publish(self) -> None:
        self._stats.set_memory_batches(len(self._bodies))


def _key(batch: Batch) -> tuple[str, int]:
    return batch.agent_boot_id, batch.seq
