"""A read-only ledger filesystem under a collector that must start on it (issue 17,
defect 11).

The collector is killed with ``kill -9`` right after acknowledging batches (left pending
in the intake log, SQLite's ``-wal`` and ``-shm`` beside the ledger), its tmpfs is
remounted read-only, and it is started again: it must refuse, naming the file it cannot
write. Remounted read-write, it must start as it is, without anyone removing the stale
``-shm`` by hand, and every sample the agents produced meanwhile (they kept sampling and
spooling) ends in the ledger exactly once.

The kernel refuses ``remount,ro`` while a file on the filesystem is open for writing, so
the read-only spell is one the collector starts into, not one it is running through.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.collector_process import CollectorProcess
from tests.faults.conftest import Report
from tests.faults.mounts import Tmpfs
from tests.faults.rig import drain, run_ticks
from tests.faults.small_disk import small_disk
from tests.faults.tally import agents_tally

pytestmark = pytest.mark.slow  # real collector processes, kill -9, mounts


def read_only_filesystem(disk: Tmpfs, db: Path, read_only: bool) -> None:
    disk.remount(read_only=read_only)


def read_only_ledger_file(disk: Tmpfs, db: Path, read_only: bool) -> None:
    """The ledger file alone made unwritable, even for root: ``chattr +i`` (immutable)."""
    flag = "+i" if read_only else "-i"
    done = subprocess.run(["chattr", flag, str(db)], capture_output=True, text=True, check=False)
    if done.returncode != 0 and read_only:
        pytest.skip(f"chattr {flag} {db}: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr


SHIP_EVERY_TICKS = 3


@pytest.mark.parametrize(
    "make_read_only",
    [read_only_filesystem, read_only_ledger_file],
    ids=["read-only-filesystem", "read-only-ledger-file"],
)
def test_a_read_only_ledger_is_refused_by_name_and_read_write_again_loses_nothing(
    make_read_only: Callable[[Tmpfs, Path, bool], None],
    tmp_path: Path,
    tmpfs: Callable[[int], Tmpfs],
    collector_at: Callable[[Path, Path], CollectorProcess],
    fault_report: Report,
) -> None:
    rig = small_disk(tmp_path, tmpfs, collector_at)
    disk, config, db, fleet = rig.disk, rig.config, rig.db, rig.fleet
    collector, agents = rig.collector, rig.agents
    collector.start()
    try:
        run_ticks(agents, 30, SHIP_EVERY_TICKS)
        assert not any(a.spooled() for a in agents)
        collector.kill()  # right after acks: batches pending, -wal and -shm left behind
        assert Path(f"{db}-shm").exists()
        make_read_only(disk, db, True)
        run_ticks(agents, 12, SHIP_EVERY_TICKS)  # the agents go on; the collector is down
        with pytest.raises(AssertionError, match="collector exited") as refused:
            collector.start()
        collector.stop_if_running()  # closes its log
        # the ledger file, or (a read-only volume) the directory SQLite must write its
        # -wal and -shm in, with the fix
        why = str(refused.value)
        names_the_file = str(db) in why or (
            make_read_only is read_only_filesystem and f"directory {db.parent} " in why
        )
        make_read_only(disk, db, False)
        collector.start()
        run_ticks(agents, 12, SHIP_EVERY_TICKS)
        drain(agents)
        collector.terminate()
    finally:
        for agent in agents:
            agent.shipper.close()
    tally, sender = agents_tally(config, db, fleet, agents)

    fault_report(
        lost=tally.lost_intervals + sender.never_accepted,
        double=len(tally.double_counted_gpus) + sender.accepted_twice,
        refusal_names_the_file=names_the_file,
    )
    assert names_the_file, str(refused.value)
    assert sender.never_accepted == 0 and sender.accepted_twice == 0
    assert tally.lost_intervals == 0 and not tally.double_counted_gpus
    assert max(tally.energy_errors().values()) <= 0.005
    assert tally.pending_batches == 0
