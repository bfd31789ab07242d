"""Observers of what the ledger has made durable: the one hook through which the InfluxDB
sink and the console's charts see batches and commits.

The ingest queue tells ``batches_stored`` once a group of batches is durable and buffered
(duplicates left out); the applier tells ``write_committed`` after each commit. Both run
on the writer's thread after the write succeeded, so an observer only enqueues or folds,
and a failing observer is logged and never fails the write: the collector's own results
do not depend on any of them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from agent.model import Batch
from collector.ledger.batch_log import BatchRecord
from collector.ledger.records import LedgerWrite

log = logging.getLogger(__name__)


class StoredBatch(NamedTuple):
    """A batch newly made durable: as recorded (body as sent) and decoded."""

    record: BatchRecord
    batch: Batch


class LedgerObserver(Protocol):
    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        """Batches newly acknowledged, in the order they were stored."""
        ...

    def write_committed(self, write: LedgerWrite) -> None:
        """A ledger commit succeeded with ``write`` (hourly usage, episodes, cursors)."""
        ...


class Observers:
    """The observers attached to one collector, told in the order they were attached."""

    def __init__(self) -> None:
        self._attached: list[LedgerObserver] = []

    def attach(self, observer: LedgerObserver) -> None:
        self._attached.append(observer)

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        if not stored:
            return
        for observer in self._attached:
            try:
                observer.batches_stored(stored)
            except Exception:  # the batches are durable; an observer must not fail the ack
                log.exception("observer %s failed on stored batches", type(observer).__name__)

    def write_committed(self, write: LedgerWrite) -> None:
        for observer in self._attached:
            try:
                observer.write_committed(write)
            except Exception:  # the commit is durable; an observer must not fail it
                log.exception("observer %s failed on a commit", type(observer).__name__)
