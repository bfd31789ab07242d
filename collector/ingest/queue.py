"""How batches come in: checked, stored in groups, buffered.

``IngestQueue`` owns the ingest thread (``GroupCommit``). ``submit`` is the HTTP app's way
in: the body as POSTed, checked by ``accept_body`` on that thread, so the event loop reads
the next requests meanwhile; ``ingest`` takes a batch already decoded, on the caller's
thread when nobody else is storing. Either way, whatever has queued is stored as one group
(one intake-log write and, at FULL, one fsync), then each stored batch goes to ``buffer``
(the pipeline's per-GPU state) and to the ``on_accepted`` hooks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import NamedTuple

import msgspec

from agent.model import Batch, BatchAck
from collector.backend import IngestError
from collector.config import CollectorSettings
from collector.ingest.decode import accept_body
from collector.ingest.group_commit import GroupCommit
from collector.ingest.stats import IngestStats
from collector.ledger.store import BatchRecord, Ledger

log = logging.getLogger(__name__)

#: the ingest thread's name (benchmarks read its CPU clock by it)
INGEST_THREAD_NAME = "gpufleet-ingest"

#: a placeholder while a group is stored (every one is replaced before the group returns)
_NOT_STORED = RuntimeError("not stored")


class Incoming(NamedTuple):
    """A batch on its way in: as sent (and how it is coded), when, since when (stats), and
    decoded if the caller has done that already (``IngestQueue.ingest``)."""

    body: bytes
    content_encoding: str | None
    received_at: float
    started: float
    batch: Batch | None = None


class IngestQueue:
    """Batches in, acks out. ``ledger`` gives the ledger to store in (it may be swapped);
    ``buffer(batch_id, batch)`` buffers a stored batch's samples and returns how many it
    took."""

    def __init__(
        self,
        settings: CollectorSettings,
        ledger: Callable[[], Ledger],
        buffer: Callable[[int, Batch], int],
        stats: IngestStats,
    ) -> None:
        self.settings = settings
        self._ledger = ledger
        self._buffer = buffer
        self.stats = stats
        self._hooks: list[Callable[[Batch], None]] = []
        #: concurrent batches share one ledger write (and fsync), then are buffered together
        self.recorder: GroupCommit[Incoming, BatchAck] = GroupCommit(
            self._store, name=INGEST_THREAD_NAME
        )

    def ingest(self, batch: Batch, body: bytes, received_at: float) -> BatchAck:
        """Make a decoded, valid ``batch`` durable and buffer its samples; a repeat is
        acknowledged and ignored. ``body`` is kept pending as sent (gzip or plain JSON).

        Concurrent calls share one ledger write; each returns once its own batch is
        durable. On a lone caller's own thread."""
        return self.recorder.submit(Incoming(body, None, received_at, time.perf_counter(), batch))

    def submit(
        self, body: bytes, content_encoding: str | None, received_at: float
    ) -> Future[BatchAck]:
        """A body as POSTed, checked (``accept_body``), stored and buffered on the ingest
        thread: the future has the ack once the batch is durable, or the IngestError that
        refuses it."""
        return self.recorder.submit_async(
            Incoming(body, content_encoding, received_at, time.perf_counter())
        )

    def on_accepted(self, hook: Callable[[Batch], None]) -> None:
        """Call ``hook`` with every accepted batch, on the ingest thread, after it is
        durable and buffered (the console's charts); a failing hook is logged."""
        self._hooks.append(hook)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the ingest thread once the batches queued for it are stored."""
        self.recorder.close(timeout)

    def _store(self, group: Sequence[Incoming]) -> list[BatchAck | BaseException]:
        """The group write: each body checked, one ledger write for those that pass, then
        each buffered. A refused batch fails alone; a failed ledger write fails the rest."""
        outcomes: list[BatchAck | BaseException] = []
        valid: list[tuple[int, Batch]] = []
        for i, item in enumerate(group):
            try:
                batch = item.batch or accept_body(
                    item.body, item.content_encoding, item.received_at, self.settings
                )
            except IngestError as err:
                outcomes.append(err)
                continue
            outcomes.append(_NOT_STORED)
            valid.append((i, batch))
        records = [
            BatchRecord(b.node, b.agent_boot_id, b.seq, group[i].received_at, group[i].body,
                        len(b.samples))
            for i, b in valid
        ]  # fmt: skip
        try:
            batch_ids = self._ledger().record_batches(records)
        except Exception as err:  # nothing of this group was acknowledged
            for i, _ in valid:
                outcomes[i] = err
            return outcomes
        accepted: list[Batch] = []
        for (i, batch), batch_id in zip(valid, batch_ids, strict=True):
            outcomes[i] = outcome = self._stored(batch, batch_id, group[i])
            if isinstance(outcome, BatchAck) and outcome.status == "accepted":
                accepted.append(batch)
        for batch in accepted:
            for hook in self._hooks:
                try:
                    hook(batch)
                except Exception:  # the batch is stored; a chart must not fail its ack
                    log.exception("an accepted-batch hook failed")
        return outcomes

    def _stored(
        self, batch: Batch, batch_id: int | None, item: Incoming
    ) -> BatchAck | BaseException:
        """Buffer a batch the ledger has stored (``batch_id`` None: a duplicate); its ack."""
        ack = BatchAck(status="duplicate", node=batch.node, agent_boot_id=batch.agent_boot_id,
                       seq=batch.seq)  # fmt: skip
        if batch_id is None:
            self.stats.count_batch("duplicate")
            return ack
        # durable and pending: after a crash ``restore`` replays it, and a tick deletes
        # only batches it has buffered
        try:
            accepted = self._buffer(batch_id, batch)
        except Exception as err:  # this batch alone: the others of the group are fine
            log.exception("buffering batch %s of %s failed", batch.seq, batch.node)
            return err
        self.stats.count_batch(
            "accepted",
            samples=accepted,
            seconds=time.perf_counter() - item.started,
            at=item.received_at,
        )
        return msgspec.structs.replace(ack, status="accepted", samples_accepted=accepted)
