"""GpuWorkers: one shared thread per read, a stuck GPU isolated, no GPU read twice at once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from agent.sources.nvml.worker import CallTimeout, GpuWorkers

TIMEOUT_SECONDS = 0.2


class Gpus:
    """Jobs that record how often and on which thread each GPU was read; GPU ``stuck``
    blocks in its first read until ``release`` is set."""

    def __init__(self, count: int, stuck: int | None = None) -> None:
        self.count = count
        self.stuck = stuck
        self.release = threading.Event()
        self.reads: Counter[int] = Counter()
        self.threads: dict[int, str] = {}
        self._lock = threading.Lock()

    def jobs(self) -> dict[int, Callable[[], int]]:
        return {index: self._job(index) for index in range(self.count)}

    def _job(self, index: int) -> Callable[[], int]:
        def read() -> int:
            with self._lock:
                self.reads[index] += 1
                first = self.reads[index] == 1
                self.threads[index] = threading.current_thread().name
            if index == self.stuck and first:
                self.release.wait(10.0)
            if index == 2:
                raise ValueError("GPU 2 failed")
            return index * 10

        return read


def test_the_gpus_are_read_one_after_another_on_one_thread_not_the_callers() -> None:
    gpus, workers = Gpus(4), GpuWorkers("test")
    answers = workers.run(gpus.jobs(), TIMEOUT_SECONDS)
    workers.stop()
    assert list(answers) == [0, 1, 2, 3]
    assert [answers[0], answers[1], answers[3]] == [0, 10, 30]
    assert isinstance(answers[2], ValueError)  # a GPU's failure is its answer, not the read's
    assert len(set(gpus.threads.values())) == 1
    assert threading.current_thread().name not in gpus.threads.values()


def test_a_stuck_gpu_keeps_its_thread_and_the_gpus_after_it_are_still_read() -> None:
    gpus, workers = Gpus(4, stuck=1), GpuWorkers("test")
    started = time.monotonic()
    first = workers.run(gpus.jobs(), TIMEOUT_SECONDS)
    elapsed_seconds = time.monotonic() - started
    assert isinstance(first[1], CallTimeout)
    assert (first[0], first[3]) == (0, 30)
    # one deadline for the stuck GPU, then the rest at once, in parallel
    assert elapsed_seconds < 3 * TIMEOUT_SECONDS
    # the stuck thread read none of the GPUs after it: each was read exactly once
    assert gpus.reads == Counter({0: 1, 1: 1, 2: 1, 3: 1})
    assert gpus.threads[3] != gpus.threads[1]

    second = workers.run(gpus.jobs(), TIMEOUT_SECONDS)
    assert isinstance(second[1], CallTimeout) and gpus.reads[1] == 1  # nothing queued behind
    assert (second[0], second[3]) == (0, 30)

    gpus.release.set()
    answer: object = None
    for _ in range(50):  # until the stuck call has returned and freed its thread
        answer = workers.run(gpus.jobs(), TIMEOUT_SECONDS)[1]
        if answer == 10:
            break
        time.sleep(0.02)
    assert answer == 10
    workers.run(gpus.jobs(), TIMEOUT_SECONDS)  # answered in time: back on the shared thread
    workers.stop()
    assert len({gpus.threads[index] for index in range(4)}) == 1


def test_a_slow_read_goes_parallel_once_it_has_taken_the_timeout() -> None:
    """Six GPUs of 0.15 s each would take 0.9 s in a row; after 0.25 s (the timeout) the
    ones not yet started run at once, so the read ends within twice the timeout, and
    every GPU answers: none of them missed its own deadline."""
    reads: Counter[int] = Counter()

    def slow(index: int) -> Callable[[], int]:
        def read() -> int:
            reads[index] += 1
            time.sleep(0.15)
            return index

        return read

    workers, timeout_seconds = GpuWorkers("test"), 0.25
    jobs = {index: slow(index) for index in range(6)}
    started = time.monotonic()
    answers = workers.run(jobs, timeout_seconds)
    elapsed_seconds = time.monotonic() - started
    workers.stop()
    assert answers == {index: index for index in range(6)}
    assert elapsed_seconds < 2 * timeout_seconds
    assert reads == Counter(dict.fromkeys(range(6), 1))
