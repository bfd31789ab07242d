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
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K")


class CallTimeout(Exception):
    """An NVML call did not come back before its deadline (the GPU may be wedged)."""


class DeadlineWorker:
    """Runs submitted calls one at a time on a daemon thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Callable[[], object], Future[object]] | None] = (
            queue.SimpleQueue()
        )
        self._pending = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], T]) -> Future[T] | None:
        """Queue ``job``; ``None`` while an earlier call is still running (wedged)."""
        with self._lock:
            if self._pending:
                return None
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
        future: Future[T] = Future()
        self._jobs.put((job, future))  # type: ignore[arg-type]
        return future

    def call(self, job: Callable[[], T], timeout_seconds: float) -> T:
        """Run ``job`` and return its result; raises CallTimeout past the deadline."""
        future = self.submit(job)
        if future is None:
            raise CallTimeout(f"{self._name}: an earlier call has not returned yet")
        try:
            return future.result(timeout=timeout_seconds)
        except FutureTimeout:
            raise CallTimeout(f"{self._name}: no answer within {timeout_seconds:g} s") from None

    def stop(self) -> None:
        """Let the thread exit once its current call (if any) returns."""
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread = None

    def _loop(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, future = item
            try:
                future.set_result(job())
            except BaseException as err:
                future.set_exception(err)
            finally:
                with self._lock:
                    self._pending -= 1


def fan_out(
    workers: Mapping[K, DeadlineWorker],
    jobs: Mapping[K, Callable[[], T]],
    timeout_seconds: float,
) -> dict[K, T | Exception]:
    """Run each job on its worker in parallel; results (or the exception) by key.

    All jobs share one deadline ``timeout_seconds`` from now; a job that misses it yields
    a CallTimeout and is left running on its thread.
    """
    deadline = time.monotonic() + timeout_seconds
    futures = {key: workers[key].submit(job) for key, job in jobs.items()}
    results: dict[K, T | Exception] = {}
    for key, future in futures.items():
        if future is None:
            results[key] = CallTimeout("an earlier NVML call has not returned yet")
            continue
        try:
            results[key] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            results[key] = CallTimeout(f"no answer within {timeout_seconds:g} s")
        except Exception as err:
            results[key] = err
    return results
