"""A spool directory on a filesystem that turns read-only or fills up, under the real
Shipper: batches wait in memory, are retried on every pass, and arrive once, in order.

The filesystem is a small tmpfs this test mounts (tests run as root, and root ignores file
modes, so a read-only *mount* is the only honest read-only spool); skipped where mounting
is not permitted.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.shipper import Shipper
from agent.stats import AgentStats
from tests.agent.test_shipper import GPUS, TOKEN, FakeCollector, settings_for, ticks, timestamps


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def make_read_only(mount_point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], check=True)


def fill_up(mount_point: Path) -> None:
    fd = os.open(mount_point / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as err:
        assert err.errno == errno.ENOSPC
    finally:
        os.close(fd)


@pytest.mark.parametrize("damage", [make_read_only, fill_up], ids=["read-only", "full"])
def test_batches_the_spool_cannot_hold_are_retried_every_pass_and_arrive_once(
    collector: FakeCollector, tmpfs: Path, caplog: pytest.LogCaptureFixture, damage: object
) -> None:
    stats = AgentStats()
    shipper = Shipper(settings_for(collector, tmpfs / "spool"), "n", stats, TOKEN)
    collector.stop()
    sent = ticks(0, 4)
    shipper.submit(GPUS, sent[0])
    assert shipper.flush() == 0  # spooled while the disk was fine
    assert callable(damage)
    damage(tmpfs)
    for tick in sent[1:]:
        shipper.submit(GPUS, tick)
        assert shipper.flush() == 0
    assert stats.snapshot().memory_batches == 3
    held = [r for r in caplog.records if "held in memory meanwhile" in r.getMessage()]
    assert len(held) == 1 and held[0].levelno == logging.ERROR  # once, not per batch

    collector.start()
    assert shipper.flush() == 4

    assert collector.samples() == timestamps(sent)  # every sample once, in order
    snap = stats.snapshot()
    assert (snap.memory_batches, snap.spool_dropped_samples_total) == (0, 0)
    shipper.close()
