"""Group commit: concurrent callers share one durable write (one transaction, one fsync).

The HTTP app runs ``Pipeline.ingest`` in a thread pool, so under load many batches wait
for the ledger at once. ``GroupCommit.submit`` queues the caller's item; the first caller
that finds no write in progress becomes the leader: it takes every item queued so far
(its own included), writes them together, hands each caller its own result and wakes the
others. Whoever queued while that write was running forms the next group. No caller waits
for company: a lone caller writes at once, so a quiet collector answers as fast as before.

A caller returns only once the write holding its item has returned; when the write
raises, every caller of that group gets the same exception, and nothing of the group is
taken as written (the ledger's transaction is all or nothing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Slot(Generic[T, R]):
    """One caller's item, and what the write made of it once ``done``."""

    __slots__ = ("done", "error", "item", "result")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = False
        self.result: R | None = None
        self.error: BaseException | None = None

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set by the write, R may be None


class GroupCommit(Generic[T, R]):
    """Runs ``write(items) -> results`` (one result per item, in order) for groups of
    concurrent ``submit`` calls, one group at a time."""

    def __init__(self, write: Callable[[Sequence[T]], Sequence[R]]) -> None:
        self._write = write
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Slot[T, R]] = []
        self._leading = False
        #: groups written and items in them, since the start (for tests and benchmarks)
        self.groups = 0
        self.items = 0

    def submit(self, item: T) -> R:
        """Write ``item`` with whatever else is queued; its result once that is durable."""
        slot: _Slot[T, R] = _Slot(item)
        with self._cond:
            self._queue.append(slot)
            while self._leading and not slot.done:
                self._cond.wait()
            if slot.done:
                return slot.outcome()
            self._leading = True
            group, self._queue = self._queue, []
        self._lead(group)
        return slot.outcome()

    def queued(self) -> int:
        """Callers waiting for the next group to be written."""
        with self._cond:
            return len(self._queue)

    def _lead(self, group: list[_Slot[T, R]]) -> None:
        results: Sequence[R] = ()
        error: BaseException | None = None
        try:
            results = self._write([s.item for s in group])
            if len(results) != len(group):
                error = RuntimeError(f"group write: {len(results)} results for {len(group)}")
        except BaseException as err:  # handed to every caller of the group, re-raised
            error = err
        with self._cond:
            for i, s in enumerate(group):
                s.done, s.error = True, error
                if error is None:
                    s.result = results[i]
            self.groups += 1
            self.items += len(group)
            self._leading = False
            self._cond.notify_all()
