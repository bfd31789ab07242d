"""The fault suite (issue 17): the real collector and real agents under the faults an
unlucky site meets, each scenario held to the simulator's ground truth and reporting the
samples lost (0 where the sender kept them) and counted twice (0).

- test_disk_full.py: the ledger and intake log on a small tmpfs that a filler file fills
  while agents keep shipping; they keep their batches, ``/readyz`` goes false within 30 s
  and true within 30 s of the space coming back, and everything ends in the ledger once.
- test_read_only.py: the ledger's filesystem remounted read-only under a collector killed
  with batches pending; the start is refused naming the file; back read-write, it starts
  (no stale ``-shm`` to remove by hand) and every batch is counted once.
- test_corrupt_segments.py: one flipped bit in a middle record of the intake log, and a
  segment cut off mid-record, under a collector killed with acknowledged batches pending:
  exactly the damaged batch is lost, loudly (ERROR naming segment and offset, the corrupt
  records counter at 1); the acks after it hold (a resend is a duplicate).
- test_clock_jumps.py: a node clock stepping +280 s for one sample, another stepping back
  an hour: nothing is discarded silently; the acks and the late counter say what was not
  taken, and the ledger lost no more than was counted.
- test_kill_under_load.py: agents posting from their own threads while the collector
  process is killed with ``kill -9`` and restarted three times: 0 lost, 0 counted twice.
- test_overload_answers.py: a proxy in front of the collector answering 429 with
  ``Retry-After``, 413 and 503 to a real agent's shipping loop: the agent waits as told,
  splits what is too large, and everything is delivered once.

A scenario reports its figures in the terminal summary ("fault suite" section).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.collector_process import CollectorProcess
from tests.faults.mounts import Tmpfs
from tests.faults.rig import TOKEN
from tests.ports import free_port_block

_REPORTS = pytest.StashKey[list[str]]()

Report = Callable[..., None]


@pytest.fixture
def fault_report(request: pytest.FixtureRequest) -> Report:
    """``fault_report(lost=..., double=..., **figures)``: one line in the summary."""

    def report(lost: int, double: int, **figures: object) -> None:
        extra = "".join(f", {k.replace('_', ' ')} {v}" for k, v in figures.items())
        line = f"{request.node.name}: samples lost {lost}, double counted {double}{extra}"
        request.config.stash.setdefault(_REPORTS, []).append(line)
        print(line)

    return report


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    lines = config.stash.get(_REPORTS, [])
    if lines:
        terminalreporter.section("fault suite: against the simulator's ground truth")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[int], Tmpfs]]:
    """``tmpfs(size_bytes)``: a fresh tmpfs on ``tmp_path/disk``, unmounted afterwards."""
    mounted: list[Tmpfs] = []

    def mount(size_bytes: int) -> Tmpfs:
        disk = Tmpfs(tmp_path / f"disk{len(mounted)}", size_bytes).mount()
        mounted.append(disk)
        return disk

    yield mount
    for disk in mounted:
        disk.unmount()


@pytest.fixture
def collector_at(tmp_path: Path) -> Iterator[Callable[[Path, Path], CollectorProcess]]:
    """``collector_at(config, db)``: the real ``gpufleet collector`` process (not started),
    killed at the end if still running."""
    made: list[CollectorProcess] = []

    def make(config: Path, db: Path) -> CollectorProcess:
        log = tmp_path / f"collector{len(made)}.log"
        made.append(CollectorProcess(config, free_port_block(1), db, TOKEN, log))
        return made[-1]

    yield make
    for process in made:
        process.stop_if_running()
