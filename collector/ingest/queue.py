"""How batches come in: checked, stored in groups, buffered.

``IngestQueue`` owns the ingest thread (``GroupCommit``). ``submit`` is the one way in,
for the HTTP app, replay, tests and benchmarks alike: the body as POSTed, checked by
``accept_body`` on that thread, so the event loop reads the next requests meanwhile.
Whatever has queued is stored as one group (one batch-log write and, at FULL, one fsync),
then each stored batch is buffered in the live fleet, and the observers are told.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import NamedTuple

import msgspec

from agent.model import Batch, BatchAck
from collector.backend import IngestError, RejectReason
from collector.config import CollectorSettings
from collector.fleet.limits import GroupTally
from collector.fleet.live import LiveFleet
from collector.ingest.decode import accept_body
from collector.ingest.group_commit import GroupCommit
from collector.ingest.stats import IngestStats
from collector.ledger.observers import Observers, StoredBatch
from collector.ledger.store import BatchRecord, Ledger

log = logging.getLogger(__name__)

#: the ingest thread's name (benchmarks read its CPU clock by it)
INGEST_THREAD_NAME = "gpufleet-ingest"

#: a placeholder while a group is stored (every one is replaced before the group returns)
_NOT_STORED = RuntimeError("not stored")


class Incoming(NamedTuple):
    """A batch on its way in: as sent (and how it is coded), when, and since when (stats)."""

    body: bytes
    content_encoding: str | None
    received_at: float
    started: float


class IngestQueue:
    """Batches in, acks out: each stored in ``ledger``, buffered in ``fleet``, and shown to
    ``observers``."""

    def __init__(
        self,
        settings: CollectorSettings,
        ledger: Ledger,
        fleet: LiveFleet,
        stats: IngestStats,
        observers: Observers,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.fleet = fleet
        self.stats = stats
        self.observers = observers
        #: concurrent batches share one ledger write (and fsync), then are buffered together
        self.recorder: GroupCommit[Incoming, BatchAck] = GroupCommit(
            self._store, name=INGEST_THREAD_NAME
        )

    def submit(
        self, body: bytes, content_encoding: str | None, received_at: float
    ) -> Future[BatchAck]:
        """A body as POSTed, checked (``accept_body``), stored and buffered on the ingest
        thread: the future has the ack once the batch is durable, or the IngestError that
        refuses it. A repeated (node, agent_boot_id, seq) acks "duplicate" and changes
        nothing; ``body`` is kept pending as sent (gzip or plain JSON)."""
        return self.recorder.submit_async(
            Incoming(body, content_encoding, received_at, time.perf_counter())
        )

    def close(self, timeout: float = 30.0) -> None:
        """Stop the ingest thread once the batches queued for it are stored."""
        self.recorder.close(timeout)

    def _store(self, group: Sequence[Incoming]) -> list[BatchAck | BaseException]:
        """The group write: each body checked, one ledger write for those that pass, then
        each buffered. A refused batch fails alone; a failed ledger write fails the rest."""
        outcomes: list[BatchAck | BaseException] = []
        valid: list[tuple[int, Batch]] = []
        clocks = self.fleet.clocks
        claimed: dict[str, str] = {}  # uuid -> node, of the batches taken in this group
        tally = GroupTally()  # what they add, for the memory bounds
        for i, item in enumerate(group):
            try:
                batch = accept_body(
                    item.body, item.content_encoding, item.received_at, self.settings, clocks
                )
                self._refuse_duplicate(batch, item.received_at, claimed)
                if breach := self.fleet.refuse_past_limits(batch, item.received_at, tally):
                    raise breach.error(len(batch.samples))
            except IngestError as err:
                outcomes.append(err)
                continue
            claimed.update((info.uuid, batch.node) for info in batch.gpus)
            outcomes.append(_NOT_STORED)
            valid.append((i, batch))
        records = [
            BatchRecord(
                b.node, b.agent_boot_id, b.seq, group[i].received_at, group[i].body, len(b.samples)
            )
            for i, b in valid
        ]
        try:
            batch_ids = self.ledger.record_batches(records)
        except Exception as err:  # nothing of this group was acknowledged
            for i, _ in valid:
                outcomes[i] = err
            return outcomes
        stored: list[StoredBatch] = []
        for (i, batch), batch_id, record in zip(valid, batch_ids, records, strict=True):
            outcomes[i] = self._stored(batch, batch_id, group[i])
            if batch_id is not None:
                stored.append(StoredBatch(record, batch))
        self.observers.batches_stored(stored)
        return outcomes

    def _refuse_duplicate(self, batch: Batch, received_at: float, claimed: dict[str, str]) -> None:
        """Raise a 409 when another node still reports one of ``batch``'s GPUs; the first
        node's figures stay its own (collector/fleet/claims.py)."""
        found = self.fleet.refuse_duplicate(batch, received_at, claimed)
        if not found:
            return
        index, dup = found[0]
        if dup.batches_refused == 1:  # once per (uuid, node): a clone posts every minute
            log.warning(
                "GPU %s claimed by node %s while node %s reports it: refused",
                dup.uuid,
                dup.claimed_by,
                dup.node,
            )
        more = f" (and {len(found) - 1} more of its GPUs)" if len(found) > 1 else ""
        err = IngestError(
            409,
            f"GPU {dup.uuid}{more} is reported by node {dup.node!r}; node {batch.node!r} "
            "claims it too (a cloned VM image or a misconfigured agent?). Batch refused: "
            "give each node its own GPUs and name (see /v1/fleet duplicate_gpus)",
            field=f"$.gpus[{index}].uuid",
            reason=RejectReason.DUPLICATE_GPU,
        )
        err.samples = len(batch.samples)
        raise err

    def _stored(
        self, batch: Batch, batch_id: int | None, item: Incoming
    ) -> BatchAck | BaseException:
        """Buffer a batch the ledger has stored (``batch_id`` None: a duplicate); its ack."""
        ack = BatchAck(
            status="duplicate", node=batch.node, agent_boot_id=batch.agent_boot_id, seq=batch.seq
        )
        if batch_id is None:
            self.stats.count_batch("duplicate")
            return ack
        # durable and pending: after a crash ``restore`` replays it, and a tick deletes
        # only batches it has buffered
        try:
            accepted = self.fleet.buffer(batch_id, batch, received_at=item.received_at)
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
