"""The batch log on a full disk: a failed append leaves no file and takes no space, the error
names the directory and says the disk is full, and appends work again once space is freed.

The disk is a 3 MiB tmpfs the test mounts (tests run as root; skipped, saying why, where
mounting is refused) and fills with files of its own.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.ledger.batch_log import BatchLog, BatchLogError, BatchRecord

CHUNK = 256 * 1024
FAILED_APPENDS = 300


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True)  # even if held open


def fill(disk: Path) -> list[Path]:
    """Files of CHUNK bytes until the disk is full; then one removed, so a little is free
    (less than a segment: a partial segment would take it)."""
    fillers: list[Path] = []
    try:
        while True:
            path = disk / f"filler-{len(fillers)}"
            fillers.append(path)
            path.write_bytes(bytes(CHUNK))
    except OSError as err:
        assert err.errno == errno.ENOSPC, err
    fillers.pop().unlink()
    fillers.pop().unlink()
    return fillers


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "page-cache"])
def test_a_full_disk_leaves_no_files_and_appends_resume_once_space_is_freed(
    small_disk: Path, sync: bool
) -> None:
    intake = small_disk / "intake"
    log = BatchLog(intake, sync=sync, segment_bytes=1 << 20)
    try:
        batch = BatchRecord("n1", "boot", 1, 0.0, b"{}" + bytes(600 * 1024), 1)
        fillers = fill(small_disk)
        files, used = sorted(os.listdir(intake)), shutil.disk_usage(small_disk).used
        messages = set()
        for _ in range(FAILED_APPENDS):
            with pytest.raises(BatchLogError) as failed:
                log.append([batch])
            messages.add(str(failed.value))
        assert sorted(os.listdir(intake)) == files == ["LOCK"]
        assert shutil.disk_usage(small_disk).used == used
        doing = f"create a segment in {intake}" if sync else f"write to {intake}"
        assert messages == {
            f"intake log: cannot {doing}: the disk is full (No space left on device); free "
            "space there (batches are refused until then)"
        }
        for path in fillers:
            path.unlink()
        [bid] = log.append([batch])
    finally:
        log.close()
    again = BatchLog(intake, sync=sync)
    again.close()
    assert [(r.batch_id, r.entry) for r in again.found] == [(bid, batch)]
    assert again.corrupt_records == 0
