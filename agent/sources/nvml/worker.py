"""Deadline-bounded NVML calls: callers never wait past a deadline, a wedged GPU holds up
no other GPU.

A wedged GPU can block an NVML call in the kernel for minutes (uninterruptible sleep). The
agent runs the GPUs' calls on daemon threads and waits for each GPU's answer only until its
deadline; a call that misses it is abandoned, its GPU reported unhealthy, and the thread
stays busy until the call returns (no second call is queued behind it). The threads are
daemons, so a call that never returns does not keep the agent from exiting.

``GpuWorkers`` reads the GPUs one after another on one shared thread: one hand-off per
read of the node instead of one per GPU (each costs ~12-20 us of CPU in thread wake-ups
and GIL hand-over, as much as a GPU's whole read; bench/agent_peers.py). A read that runs
out of time there goes parallel, and a GPU that misses its deadline keeps the stuck thread
as its own until it answers in time again (GpuWorkers' docstring).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar, cast

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


class _Replies:
    """Jobs started each on its own worker, their answers gathered against one deadline."""

    def __init__(
        self,
        workers: Mapping[K, DeadlineWorker],
        jobs: Mapping[K, Callable[[], object]],
        timeout_seconds: float,
    ) -> None:
        self._keys = list(jobs)
        self._timeout_seconds = timeout_seconds
        self._deadline = time.monotonic() + timeout_seconds
        self._replies: queue.SimpleQueue[_Reply] = queue.SimpleQueue()
        self._answers: dict[Any, object] = {}
        self._waiting = 0
        for key, job in jobs.items():
            if workers[key].submit(job, self._replies, key):
                self._waiting += 1
            else:
                self._answers[key] = CallTimeout("an earlier NVML call has not returned yet")

    def collect(self) -> dict[Any, object]:
        """Each key's result or exception, in the jobs' order; CallTimeout past the deadline."""
        while self._waiting:
            try:
                remaining = max(0.0, self._deadline - time.monotonic())
                key, ok, value = self._replies.get(timeout=remaining)
            except queue.Empty:
                break
            self._waiting -= 1
            if not ok and not isinstance(value, Exception):
                raise value  # KeyboardInterrupt, SystemExit: not a GPU's failure
            self._answers[key] = value
        answers, late = self._answers, f"no answer within {self._timeout_seconds:g} s"
        return {key: answers[key] if key in answers else CallTimeout(late) for key in self._keys}


class _Batch:
    """One read's jobs run one after another on the shared thread, and how far it got.

    ``stop`` lets the job under way finish (a call cannot be interrupted) and starts no
    further one.
    """

    def __init__(self, jobs: Mapping[Any, Callable[[], object]]) -> None:
        self._jobs = list(jobs.items())
        self._lock = threading.Lock()
        self._answers: dict[Any, object] = {}
        #: the key of the job under way and when it started (monotonic seconds)
        self._current: tuple[Any, float] | None = None
        self._stopped = False

    def run(self) -> None:
        for key, job in self._jobs:
            with self._lock:
                if self._stopped:
                    return
                self._current = (key, time.monotonic())
            try:
                answer: object = job()
            except Exception as err:  # the GPU's failure; BaseException ends the batch
                answer = err
            with self._lock:
                self._answers[key] = answer
                self._current = None

    def stop(self) -> tuple[dict[Any, object], tuple[Any, float] | None]:
        """Start no further job: the answers so far, and the job under way (key, start)."""
        with self._lock:
            self._stopped = True
            return dict(self._answers), self._current

    def answers(self) -> dict[Any, object]:
        with self._lock:
            return dict(self._answers)


class GpuWorkers:
    """Runs one job per GPU (keyed by GPU) with ``timeout_seconds`` each from its start.

    The jobs run one after another on a shared thread. Once the whole read has taken
    ``timeout_seconds`` (a slow driver, or a GPU that wedged), no further job starts
    there: the job under way gets the rest of its own deadline, the jobs not yet started
    run at once, each on a thread of its own. A read takes at most twice the timeout.
    A job that misses its deadline keeps its thread, and its GPU is read on that thread
    (never queued behind the stuck call) until it answers in time again.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._threads_started = 0
        self._shared = self._new_worker("shared")
        #: GPUs read on a thread of their own: they missed a deadline and have not
        #: answered in time since
        self._own: dict[Any, DeadlineWorker] = {}

    def run(
        self, jobs: Mapping[K, Callable[[], T]], timeout_seconds: float
    ) -> dict[K, T | Exception]:
        """Each job's result or exception by key, in the order of ``jobs``; CallTimeout
        for a job past its deadline (left running on its thread)."""
        own = {k: j for k, j in jobs.items() if k in self._own}
        shared = {k: j for k, j in jobs.items() if k not in self._own}
        alone = self._start_alone(own, timeout_seconds)
        answers = self._run_shared(shared, timeout_seconds) if shared else {}
        answers.update(self._finish_alone(alone))
        return cast(dict[K, T | Exception], {key: answers[key] for key in jobs})

    def stop(self) -> None:
        """Let every thread exit once its current call (if any) returns."""
        for worker in [self._shared, *self._own.values()]:
            worker.stop()

    def _run_shared(
        self, jobs: Mapping[Any, Callable[[], object]], timeout_seconds: float
    ) -> dict[Any, object]:
        batch, replies = _Batch(jobs), queue.SimpleQueue[_Reply]()
        if not self._shared.submit(batch.run, replies, None):
            # not expected (a stuck shared thread is handed to its GPU): read them apart
            return self._finish_alone(self._start_alone(jobs, timeout_seconds))
        try:
            _, ok, value = replies.get(timeout=timeout_seconds)
        except queue.Empty:
            return self._split(batch, replies, jobs, timeout_seconds)
        if not ok:
            raise value  # KeyboardInterrupt, SystemExit: not a GPU's failure
        return batch.answers()

    def _split(
        self,
        batch: _Batch,
        replies: queue.SimpleQueue[_Reply],
        jobs: Mapping[Any, Callable[[], object]],
        timeout_seconds: float,
    ) -> dict[Any, object]:
        """The read ran out of time on the shared thread: see the class docstring."""
        answers, current = batch.stop()
        under_way = current[0] if current else None
        rest = {k: j for k, j in jobs.items() if k not in answers and k != under_way}
        alone = self._start_alone(rest, timeout_seconds)
        started = current[1] if current else time.monotonic()
        try:  # the batch answers once the job under way (if any) returns
            _, ok, value = replies.get(
                timeout=max(0.0, started + timeout_seconds - time.monotonic())
            )
            if not ok:
                raise value
            answers = batch.answers()
        except queue.Empty:
            stuck, self._shared = self._shared, self._new_worker("shared")
            if current is None:  # the thread never got to the batch: let it go
                stuck.stop()
            else:
                answers[under_way] = CallTimeout(f"no answer within {timeout_seconds:g} s")
                self._own[under_way] = stuck
        answers.update(self._finish_alone(alone))
        return answers

    def _start_alone(
        self, jobs: Mapping[Any, Callable[[], object]], timeout_seconds: float
    ) -> _Replies:
        for key in jobs:
            if key not in self._own:
                self._own[key] = self._new_worker(str(key))
        return _Replies(self._own, jobs, timeout_seconds)

    def _finish_alone(self, replies: _Replies) -> dict[Any, object]:
        """The answers; a GPU that answered in time rejoins the shared thread."""
        answers = replies.collect()
        for key, answer in answers.items():
            if not isinstance(answer, CallTimeout):
                self._own.pop(key).stop()
        return answers

    def _new_worker(self, role: str) -> DeadlineWorker:
        self._threads_started += 1
        return DeadlineWorker(f"{self._name}-{role}-{self._threads_started}")
