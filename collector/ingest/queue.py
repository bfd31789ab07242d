"""How batches come in: checked, stored in groups, buffered.

``IngestQueue`` owns the ingest thread (``GroupCommit``). ``submit`` is the one way in,
for the HTTP app, replay, tests and benchmarks alike: the body as POSTed, checked by
``accept_body`` on that thread, so the event loop reads the next requests meanwhile.
Whatever has queued is stored as one group (one batch-log write and, at FULL, one fsync),
then each stored batch is buffered in the live fleet, and the observers are told.
Whether the batch-log write worked is told to ``WriteHealth`` (readiness). A stored batch
whose buffering raises is quarantined (collector/ledger/quarantine.py) and answered with
the error: it never reaches the ledger's figures. (A value the ledger cannot hold never
gets this far: the rule table, collector/ingest/rules.py, refuses it at decode.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
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
from collector.ledger.batch_log import LoggedBatch
from collector.ledger.observers import Observers, StoredBatch
from collector.ledger.records import batch_json
from collector.ledger.store import BatchRecord, Ledger
from collector.ledger.write_health import WriteHealth
from collector.node_binding import NodeBinding

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
    #: the posting token's node binding; None: any node
    nodes: NodeBinding | None = None


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
        health: WriteHealth | None = None,
        buffer_here: bool = True,
        enrich: Callable[[Batch], Batch] | None = None,
    ) -> None:
        """``buffer_here`` False (a replica, collector/replicas.py): a stored batch is
        acknowledged, not buffered: its shard's owner takes it from the intake. ``enrich``:
        what a stored batch passes through before the fleet sees it (pod workloads
        attributed to owners and teams, collector/kube/enrich.py)."""
        self.buffer_here = buffer_here
        self.settings = settings
        self.enrich = enrich
        self.health = health or WriteHealth()
        self.ledger = ledger
        self.fleet = fleet
        self.stats = stats
        self.observers = observers
        #: concurrent batches share one ledger write (and fsync), then are buffered together
        self.recorder: GroupCommit[Incoming, BatchAck] = GroupCommit(
            self._store, name=INGEST_THREAD_NAME
        )

    def submit(
        self,
        body: bytes,
        content_encoding: str | None,
        received_at: float,
        nodes: NodeBinding | None = None,
    ) -> Future[BatchAck]:
        """A body as POSTed, checked (``accept_body``), stored and buffered on the ingest
        thread: the future has the ack once the batch is durable, or the IngestError that
        refuses it. A repeated (node, agent_boot_id, seq) acks "duplicate" and changes
        nothing; ``body`` is kept pending as sent (gzip or plain JSON). A batch for a node
        ``nodes`` does not allow is refused 403 before it can claim a GPU or a seq."""
        return self.recorder.submit_async(
            Incoming(body, content_encoding, received_at, time.perf_counter(), nodes)
        )

    def close(self, timeout: float = 30.0) -> None:
        """Stop the ingest thread once the batches queued for it are stored."""
        self.recorder.close(timeout)

    def _store(self, group: Sequence[Incoming]) -> list[BatchAck | BaseException]:
        """The group write: each body checked, one ledger write for those that pass, then
        each buffered. A refused batch fails alone; a failed ledger write fails the rest."""
        outcomes: list[BatchAck | BaseException] = []
        valid: list[tuple[int, Batch]] = []
        claimed: dict[str, str] = {}  # uuid -> node, of the batches taken in this group
        tally = GroupTally()  # what they add, for the memory bounds
        for i, item in enumerate(group):
            try:
                batch = self._accept(item, claimed, tally)
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
            self.health.intake_failed(err)
            for i, _ in valid:
                outcomes[i] = err
            return outcomes
        if records:
            self.health.intake_ok()
        stored: list[StoredBatch] = []
        for (i, batch), batch_id, record in zip(valid, batch_ids, records, strict=True):
            outcomes[i] = self._stored(batch, batch_id, group[i], record)
            if batch_id is not None:
                stored.append(StoredBatch(record, batch))
        self.observers.batches_stored(stored)
        return outcomes

    def _accept(self, item: Incoming, claimed: dict[str, str], tally: GroupTally) -> Batch:
        """``item``'s batch, checked; an IngestError refuses it. Checking one body never
        fails the group: an unexpected error (a bug, or input no rule foresaw) refuses
        that batch alone with a 500, logged with its traceback."""
        try:
            batch = accept_body(
                item.body,
                item.content_encoding,
                item.received_at,
                self.settings,
                self.fleet.clocks,
                self.fleet.max_power_of,
            )
            _refuse_foreign_node(batch, item.nodes)
            self._refuse_duplicate(batch, item.received_at, claimed)
            if breach := self.fleet.refuse_past_limits(batch, item.received_at, tally):
                raise breach.error(len(batch.samples))
        except IngestError:
            raise
        except Exception as err:
            log.exception("checking a batch failed (%d bytes); refused alone", len(item.body))
            raise IngestError(
                500,
                f"the collector failed checking this batch ({type(err).__name__}); it is "
                "logged: report it with the collector's log",
                reason=RejectReason.INTERNAL_ERROR,
            ) from err
        return batch

    def _quarantine(self, logged: LoggedBatch, err: Exception) -> Exception:
        """Set a stored batch that cannot be applied aside; ``err`` answers its sender."""
        error = f"{type(err).__name__}: {err}"
        try:
            body = batch_json(logged.entry.body)
            self.ledger.quarantine(logged, body, error, time.time())
        except OSError as failure:  # pending still: the next start replays and judges it
            log.error("batch %d cannot be quarantined (%s)", logged.batch_id, failure)
        return err

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
        self, batch: Batch, batch_id: int | None, item: Incoming, record: BatchRecord
    ) -> BatchAck | BaseException:
        """Buffer a batch the ledger has stored (``batch_id`` None: a duplicate); its ack."""
        ack = BatchAck(
            status="duplicate", node=batch.node, agent_boot_id=batch.agent_boot_id, seq=batch.seq
        )
        if batch_id is None:
            self.stats.count_batch("duplicate")
            return ack
        if not self.buffer_here:
            count = len(batch.samples)
            seconds = time.perf_counter() - item.started
            self.stats.count_batch("accepted", samples=count, seconds=seconds, at=item.received_at)
            return msgspec.structs.replace(ack, status="accepted", samples_accepted=count)
        # durable and pending: after a crash ``restore`` replays it, and a tick deletes
        # only batches it has buffered
        try:
            if self.enrich is not None:
                batch = self.enrich(batch)
            taken = self.fleet.buffer(batch_id, batch, received_at=item.received_at)
        except Exception as err:  # this batch alone: the others of the group are fine
            log.exception("buffering batch %s of %s failed", batch.seq, batch.node)
            return self._quarantine(LoggedBatch(batch_id, record), err)
        self.stats.count_batch(
            "accepted",
            samples=taken.accepted,
            seconds=time.perf_counter() - item.started,
            at=item.received_at,
        )
        return msgspec.structs.replace(
            ack,
            status="accepted",
            samples_accepted=taken.accepted,
            samples_late=taken.late,
            warnings=(taken.warning,) if taken.warning else (),
        )


def _refuse_foreign_node(batch: Batch, nodes: NodeBinding | None) -> None:
    """A 403 for a batch of a node its token is not bound to: checked before the batch
    can claim a GPU (``_refuse_duplicate``) or a seq (the ledger's acks)."""
    if nodes is None or nodes.allows(batch.node):
        return
    err = IngestError(
        403, nodes.refusal(batch.node), field="$.node", reason=RejectReason.NODE_NOT_ALLOWED
    )
    err.samples = len(batch.samples)
    raise err
