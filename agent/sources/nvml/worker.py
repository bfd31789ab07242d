"""Deadline-bounded NVML calls: one daemon thread per GPU, callers never wait past a deadline.

A wedged GPU can block an NVML call in the kernel for minutes (uninterruptible sleep). The
agent runs each GPU's calls on that GPU's own thread and waits for the answer only until a
deadline; a call that misses it is abandoned, its GPU reported unhealthy, and the thread
stays busy until the call returns (no second call is queued behind it). The threads are
daemons, so a call that never returns does not keep the agent from exiting.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

#: (key, True, result) or (key, False, the exception the job raised)
_Reply = tuple[Any, bool, Any]
_Job = tuple[Callable[[], object], "queue.SimpleQueue[_Reply]", object]


class CallTimeout(Exception):
    """An NVML call did not come back before its deadline (the GPU may be wedged)."""


class DeadlineWorker:
    """Runs submitted calls one at a time on a daemon thread.

    Answers go to a reply queue the caller owns (a C-implemented SimpleQueue, not a
    Future with its Python-level Condition: a read of 8 GPUs makes 8 hand-offs a second,
    and the agent's per-poll CPU is what it is judged on). A call abandoned past its
    deadline answers into the queue of the caller that gave up, which nobody reads again.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(
        self, job: Callable[[], object], replies: queue.SimpleQueue[_Reply], key: object
    ) -> bool:
        """Queue ``job``, its answer to go to ``replies`` tagged ``key``; False while an
        earlier call is still running (wedged)."""
        with self._lock:
            if self._pending:
                return False
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
        self._jobs.put((job, replies, key))
        return True

    def call(self, job: Callable[[], T], timeout_seconds: float) -> T:
        """Run ``job`` and return its result; raises CallTimeout past the deadline."""
        replies: queue.SimpleQueue[_Reply] = queue.SimpleQueue()
        if not self.submit(job, replies, None):
            raise CallTimeout(f"{self._name}: an earlier call has not returned yet")
        try:
            _, ok, value = replies.get(timeout=timeout_seconds)
        except queue.Empty:
            raise CallTimeout(f"{self._name}: no answer within {timeout_seconds:g} s") from None
        if not ok:
            raise value
        result: T = value
        return result

    def stop(self) -> None:
        """Let the thread exit once its current call (if any) returns."""
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread = None

    def _loop(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, replies, key = item
            try:
                reply: _Reply = (key, True, job())
            except BaseException as err:
                reply = (key, False, err)
            # free before answering, so a caller that got the answer may submit again at once
            with self._lock:
                self._pending -= 1
            replies.put(reply)


def fan_out(
    workers: Mapping[K, DeadlineWorker],
    jobs: Mapping[K, Callable[[], T]],
    timeout_seconds: float,
) -> dict[K, T | Exception]:
    """Run each job on its worker in parallel; results (or the exception) by key, in
    the order of ``jobs``.

    All jobs share one deadline ``timeout_seconds`` from now; a job that misses it yields
    a CallTimeout and is left running on its thread.
    """
    deadline = time.monotonic() + timeout_seconds
    replies: queue.SimpleQueue[_Reply] = queue.SimpleQueue()
    answers: dict[K, T | Exception] = {}
    waiting = 0
    for key, job in jobs.items():
        if workers[key].submit(job, replies, key):
            waiting += 1
        else:
            answers[key] = CallTimeout("an earlier NVML call has not returned yet")
    while waiting:
        try:
            key, ok, value = replies.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        waiting -= 1
        if not ok and not isinstance(value, Exception):
            raise value  # KeyboardInterrupt, SystemExit: not a GPU's failure
        answers[key] = value
    return {
        key: answers[key]
        if key in answers
        else CallTimeout(f"no answer within {timeout_seconds:g} s")
        for key in jobs
    }
