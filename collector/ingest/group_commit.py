"""Group commit: concurrent callers share one durable write (one transaction, one fsync).

Two ways in:

- ``submit(item)`` blocks. The first caller that finds no write in progress becomes the
  leader: it takes every item queued so far (its own included), writes them together,
  hands each caller its own result and wakes the others. Whoever queued while that write
  was running forms the next group. A lone caller writes at once, on its own thread, so
  a quiet collector answers as fast as before.
- ``submit_async(item)`` returns a ``Future`` at once. The HTTP app's event loop uses it:
  one worker thread (started on first use) leads the groups of queued items, so the loop
  goes on decoding the next requests while a group waits for its fsync, and no pool of
  threads contends for the interpreter.

Either way the leader writes whatever is queued, blocking and asynchronous items alike.
A caller's result comes once the write holding its item has returned. When the write
raises, every item of the group gets that exception (the ledger's transaction is all or
nothing); a write may also return an exception as one item's result, which reaches that
item's caller alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")
#: items -> one result per item, in order (an exception fails that item alone)
GroupWrite = Callable[[Sequence[T]], Sequence[R | BaseException]]


class _Slot(Generic[T, R]):
    """One caller's item, and what the write made of it once ``done``."""

    __slots__ = ("done", "error", "future", "item", "result")

    def __init__(self, item: T, future: Future[R] | None = None) -> None:
        self.item = item
        self.future = future
        self.done = False
        self.result: R | None = None
        self.error: BaseException | None = None

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set by the write, R may be None

    def settle(self) -> None:
        """Hand an asynchronous caller its outcome (outside the lock: callbacks run here).
        A caller that cancelled its future meanwhile (a client gone) gets nothing: its item
        was written all the same, and a retry of it is the write's business."""
        if self.future is None:
            return
        try:
            if self.error is not None:
                self.future.set_exception(self.error)
            else:
                self.future.set_result(self.result)  # type: ignore[arg-type]  # R may be None
        except InvalidStateError:  # cancelled: the worker must live on for the others
            pass


class GroupCommit(Generic[T, R]):
    """Runs ``write(items) -> results`` (one result per item, in order; an exception as a
    result fails that item alone) for groups of concurrent submissions, one group at a
    time."""

    def __init__(self, write: GroupWrite[T, R], name: str = "group-commit") -> None:
        self._write = write
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Slot[T, R]] = []
        self._leading = False
        self._worker: threading.Thread | None = None
        self._closed = False
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

    def submit_async(self, item: T) -> Future[R]:
        """Queue ``item`` for the worker thread; the future has its result once durable."""
        future: Future[R] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self._name}: closed")
            self._queue.append(_Slot(item, future))
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._worker.start()
            self._cond.notify_all()
        return future

    def queued(self) -> int:
        """Items waiting for the next group to be written."""
        with self._cond:
            return len(self._queue)

    def close(self, timeout: float | None = None) -> None:
        """Stop the worker once every queued item is written; later ``submit_async`` raise."""
        with self._cond:
            self._closed = True
            worker = self._worker
            self._cond.notify_all()
        if worker is not None:
            worker.join(timeout)

    def _work(self) -> None:
        while True:
            with self._cond:
                while self._leading or not self._queue:
                    if self._closed and not self._queue:
                        return
                    self._cond.wait()
                self._leading = True
                group, self._queue = self._queue, []
            self._lead(group)

    def _lead(self, group: list[_Slot[T, R]]) -> None:
        results: Sequence[R | BaseException] = ()
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
                    result = results[i]
                    if isinstance(result, BaseException):
                        s.error = result
                    else:
                        s.result = result
            self.groups += 1
            self.items += len(group)
            self._leading = False
            self._cond.notify_all()
        for s in group:
            s.settle()
