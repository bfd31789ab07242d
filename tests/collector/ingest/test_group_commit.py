"""GroupCommit with real threads: callers that arrive during a write share the next one."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from collector.ingest.group_commit import GroupCommit

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


def test_asynchronous_items_queued_during_a_write_go_together_on_the_worker_thread() -> None:
    write = GatedWrite()
    threads: list[str] = []

    def recording(items: Sequence[str]) -> list[str]:
        threads.append(threading.current_thread().name)
        return write(items)

    committer: GroupCommit[str, str] = GroupCommit(recording, name="ingest-test")
    first = committer.submit_async("a")
    assert write.started.wait(TIMEOUT_S)
    rest = [committer.submit_async(item) for item in ("b", "c", "d")]
    assert not first.done() and committer.queued() == 3  # nobody answered during "a"
    write.gate.set()
    assert [f.result(TIMEOUT_S) for f in (first, *rest)] == ["A", "B", "C", "D"]
    assert write.groups == [["a"], ["b", "c", "d"]]
    assert threads == ["ingest-test", "ingest-test"]
    committer.close(TIMEOUT_S)


def test_a_blocking_caller_and_the_worker_share_groups_and_each_gets_its_own_result() -> None:
    write = GatedWrite()
    committer: GroupCommit[str, str] = GroupCommit(write)
    first = committer.submit_async("a")
    assert write.started.wait(TIMEOUT_S)
    blocked, results = submit_in_threads(committer, ["b"])
    later = committer.submit_async("c")
    wait_until_queued(committer, 2)
    write.gate.set()
    for thread in blocked:
        thread.join(TIMEOUT_S)
    assert (first.result(TIMEOUT_S), results, later.result(TIMEOUT_S)) == ("A", {"b": "B"}, "C")
    assert sorted(write.groups[1]) == ["b", "c"]
    committer.close(TIMEOUT_S)


def test_an_exception_as_one_result_fails_that_item_alone() -> None:
    def write(items: Sequence[int]) -> list[int | BaseException]:
        return [ValueError(f"item {i} refused") if i < 0 else i * 2 for i in items]

    committer: GroupCommit[int, int] = GroupCommit(write)
    futures = [committer.submit_async(i) for i in (1, -1, 2)]
    assert futures[0].result(TIMEOUT_S) == 2 and futures[2].result(TIMEOUT_S) == 4
    with pytest.raises(ValueError, match="item -1 refused"):
        futures[1].result(TIMEOUT_S)
    with pytest.raises(ValueError, match="item -3 refused"):
        committer.submit(-3)
    committer.close(TIMEOUT_S)


def test_close_writes_what_is_queued_then_refuses_more() -> None:
    write = GatedWrite()
    committer: GroupCommit[str, str] = GroupCommit(write)
    queued = [committer.submit_async(item) for item in ("a", "b")]
    assert write.started.wait(TIMEOUT_S)
    closing = threading.Thread(target=committer.close, args=(TIMEOUT_S,))
    closing.start()
    write.gate.set()
    closing.join(TIMEOUT_S)
    assert not closing.is_alive()
    assert [f.result(0) for f in queued] == ["A", "B"]
    with pytest.raises(RuntimeError, match="closed"):
        committer.submit_async("c")


def test_a_future_cancelled_while_its_item_is_written_leaves_the_worker_serving() -> None:
    """The app's request may go away (a client that disconnects cancels its future); the
    item is written all the same and the next items are served."""
    write = GatedWrite()
    committer: GroupCommit[str, str] = GroupCommit(write)
    gone = committer.submit_async("a")
    assert write.started.wait(TIMEOUT_S)
    assert gone.cancel()
    write.gate.set()
    assert committer.submit_async("b").result(TIMEOUT_S) == "B"
    assert write.groups[0] == ["a"] and gone.cancelled()
    committer.close(TIMEOUT_S)
