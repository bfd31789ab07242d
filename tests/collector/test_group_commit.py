"""GroupCommit with real threads: callers that arrive during a write share the next one."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from collector.group_commit import GroupCommit

TIMEOUT_S = 10.0


class GatedWrite:
    """A write that records its groups and, while ``gate`` is closed, blocks inside the
    first call once it has started (so others pile up behind it)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.groups: list[list[str]] = []
        self.started = threading.Event()
        self.gate = threading.Event()
        self.fail_on = fail_on

    def __call__(self, items: Sequence[str]) -> list[str]:
        self.groups.append(list(items))
        self.started.set()
        assert self.gate.wait(TIMEOUT_S)
        if self.fail_on in items:
            raise OSError(f"disk full while writing {self.fail_on}")
        return [item.upper() for item in items]


def submit_in_threads(
    committer: GroupCommit[str, str], items: list[str]
) -> tuple[list[threading.Thread], dict[str, object]]:
    results: dict[str, object] = {}

    def call(item: str) -> None:
        try:
            results[item] = committer.submit(item)
        except OSError as err:
            results[item] = err

    threads = [threading.Thread(target=call, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    return threads, results


def wait_until_queued(committer: GroupCommit[str, str], count: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while committer.queued() < count:
        assert time.monotonic() < deadline, "callers did not queue"
        time.sleep(0.001)


def test_callers_arriving_during_a_write_share_the_next_and_get_their_own_result() -> None:
    write = GatedWrite()
    committer: GroupCommit[str, str] = GroupCommit(write)
    first, results = submit_in_threads(committer, ["a"])
    assert write.started.wait(TIMEOUT_S)
    rest, more = submit_in_threads(committer, ["b", "c", "d", "e"])
    wait_until_queued(committer, 4)
    assert results == {} and more == {}  # nobody answered while "a" is being written
    write.gate.set()
    for thread in first + rest:
        thread.join(TIMEOUT_S)
    assert write.groups[0] == ["a"]
    assert sorted(write.groups[1]) == ["b", "c", "d", "e"] and len(write.groups) == 2
    assert {**results, **more} == {"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"}
    assert (committer.groups, committer.items) == (2, 5)


def test_a_failed_write_fails_every_caller_of_its_group_and_the_next_group_goes_on() -> None:
    write = GatedWrite(fail_on="c")
    committer: GroupCommit[str, str] = GroupCommit(write)
    first, results = submit_in_threads(committer, ["a"])
    assert write.started.wait(TIMEOUT_S)
    rest, more = submit_in_threads(committer, ["b", "c"])
    wait_until_queued(committer, 2)
    write.gate.set()
    for thread in first + rest:
        thread.join(TIMEOUT_S)
    assert results == {"a": "A"}
    assert all(isinstance(more[k], OSError) for k in ("b", "c"))
    assert committer.submit("f") == "F"  # a failure leaves no leader behind


def test_a_lone_caller_writes_at_once() -> None:
    groups: list[list[int]] = []

    def write(items: Sequence[int]) -> list[int]:
        groups.append(list(items))
        return [i * 2 for i in items]

    committer: GroupCommit[int, int] = GroupCommit(write)
    assert [committer.submit(i) for i in range(3)] == [0, 2, 4]
    assert groups == [[0], [1], [2]]


def test_a_write_returning_the_wrong_number_of_results_fails_its_callers() -> None:
    committer: GroupCommit[int, int] = GroupCommit(lambda items: [])
    with pytest.raises(RuntimeError, match="0 results for 1"):
        committer.submit(1)
