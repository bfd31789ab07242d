"""A small tmpfs the test mounts for the collector's ledger: filled, freed, remounted.

Tests run as root on the CI machine; where ``mount`` is not permitted (an unprivileged
container) ``Tmpfs.mount`` skips the test and says so, rather than faking a full disk.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

FILLER_NAME = "filler.bin"


class Tmpfs:
    """``size_bytes`` of tmpfs on ``path`` (created), until ``unmount``."""

    def __init__(self, path: Path, size_bytes: int) -> None:
        self.path, self.size_bytes = path, size_bytes
        self.mounted = False

    def mount(self) -> Tmpfs:
        self.path.mkdir(parents=True, exist_ok=True)
        done = _mount("-t", "tmpfs", "-o", f"size={self.size_bytes}", "tmpfs", str(self.path))
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs on {self.path} (needs root): {done.stderr.strip()}")
        self.mounted = True
        return self

    def fill(self) -> int:
        """Write a filler file until the filesystem has no space left; its size."""
        written = 0
        chunk = bytes(64 * 1024)
        with (self.path / FILLER_NAME).open("wb", buffering=0) as filler:
            while True:
                try:
                    written += filler.write(chunk) or 0
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    chunk = chunk[: len(chunk) // 2]  # the last few pages
                    if not chunk:
                        return written

    def free(self) -> None:
        (self.path / FILLER_NAME).unlink(missing_ok=True)

    def remount(self, *, read_only: bool) -> None:
        """``mount -o remount,ro`` (or ``rw``): the kernel refuses ``ro`` while a file on
        it is open for writing, so the collector must not be running."""
        done = _mount("-o", "remount," + ("ro" if read_only else "rw"), str(self.path))
        assert done.returncode == 0, f"remount {self.path}: {done.stderr.strip()}"

    def free_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def unmount(self) -> None:
        if self.mounted:
            # lazy: a collector killed a moment ago may still hold a file for a while
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)
            self.mounted = False


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as err:
        return subprocess.CompletedProcess(["mount"], 127, "", str(err))
