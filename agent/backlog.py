"""Every batch waiting for the collector, oldest first: the spool's, and those held in
memory because the spool could not store them (agent/memory_queue.py).

The shipper's send pass sees one list and does the same to each batch wherever it waits:
send it, remove it once acknowledged or refused for good, or put its halves in its place
after a 413 (on disk through Spool.split, crash-safe; in memory, in its slot). Thread-safe:
the sampler's thread adds while the shipping thread sends.
"""

from __future__ import annotations

import gzip
import logging
import threading

import msgspec

from agent.batch_split import halves
from agent.memory_queue import MemoryQueue
from agent.model import Batch, decode_batch
from agent.shipping_log import ShippingLog
from agent.spool import Spool, SpooledBatch, SpoolError
from agent.stats import AgentStats

log = logging.getLogger("agent.shipper")

#: a batch waiting: in the spool, or in memory
Item = SpooledBatch | Batch


def identity(item: Item) -> tuple[str, int, int]:
    """Boot id, seq and sample count of a waiting batch."""
    if isinstance(item, Batch):
        return item.agent_boot_id, item.seq, len(item.samples)
    return item.boot_id, item.seq, item.samples


class Backlog:
    """The spool and the memory queue behind one lock, as one oldest-first list."""

    def __init__(
        self, spool: Spool, memory_max_bytes: int, shipping_log: ShippingLog, stats: AgentStats
    ) -> None:
        self._spool = spool
        self._log = shipping_log
        self._memory = MemoryQueue(memory_max_bytes, shipping_log, stats)
        self._lock = threading.Lock()
        #: the spool refused the latest batch: said once, until a batch is spooled again
        self._spool_failing = False

    def add(self, batch: Batch) -> None:
        """Spool ``batch``; hold it in memory when the spool cannot store it."""
        with self._lock:
            try:
                self._spool.append(batch)
            except SpoolError as err:
                if not self._spool_failing:
                    log.error("shipper: %s; batches are held in memory meanwhile", err)
                self._spool_failing = True
                self._memory.add(batch)
                return
            if self._spool_failing:
                self._spool_failing = False
                log.warning("shipper: the spool stores batches again")

    def pending(self) -> list[Item]:
        """Every waiting batch, oldest first (by when it was cut), wherever it waits."""
        with self._lock:
            spooled: list[tuple[tuple[float, str, int], Item]] = [
                ((e.created_ns / 1e9, e.boot_id, e.seq), e) for e in self._spool.pending()
            ]
            held = [((b.sent_at, b.agent_boot_id, b.seq), b) for b in self._memory.batches()]
        return [item for _, item in sorted([*spooled, *held], key=lambda pair: pair[0])]

    def body(self, item: Item) -> bytes | None:
        """The gzipped body to send; None when the batch is gone (or its file corrupt)."""
        with self._lock:
            if isinstance(item, Batch):
                return self._memory.body(item)
            return self._spool.read_body(item)

    def remove(self, item: Item) -> None:
        with self._lock:
            if isinstance(item, Batch):
                self._memory.remove(item)
            else:
                self._spool.remove(item)

    def split(self, item: Item, body: bytes) -> list[Item] | None:
        """Put the two halves of ``item`` in its place and return them; [] when it cannot
        be split (then it is lost, logged and counted); None when the halves could not be
        stored (the batch stays whole, for a later pass)."""
        batch = item if isinstance(item, Batch) else _decoded(body)
        parts = halves(batch) if batch is not None else None
        if parts is None:
            self.remove(item)
            self._log.lost(*identity(item), "too large to send, and it cannot be split")
            return []
        with self._lock:
            if isinstance(item, Batch):
                return list(self._memory.replace(item, parts))
            try:
                return list(self._spool.split(item, *parts))
            except SpoolError as err:
                boot_id, seq, _ = identity(item)
                self._log.complain("split", f"{err}; batch {boot_id}/{seq} stays whole for now")
                return None

    def lose_memory(self, why: str) -> None:
        """Drop what only memory holds (shutdown), each batch logged and counted."""
        with self._lock:
            self._memory.lose_all(why)


def _decoded(body: bytes) -> Batch | None:
    try:
        return decode_batch(gzip.decompress(body))
    except (OSError, EOFError, msgspec.DecodeError):
        return None
