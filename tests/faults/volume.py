"""A small filesystem of its own for a test: a tmpfs mounted by the test (it runs as root),
filled up and freed, or remounted read-only. Skips, saying why, where mounting is not
permitted (no root, no CAP_SYS_ADMIN)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@contextmanager
def tmpfs(where: Path, size_bytes: int) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(where))
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or err
        pytest.skip(f"cannot mount a tmpfs for this test (needs root): {detail}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def remount(where: Path, mode: str) -> None:
    """``mode``: "ro" or "rw"."""
    _mount("-o", f"remount,{mode}", str(where))


def fill(where: Path) -> Path:
    """Write a file in ``where`` until the filesystem is full; the file (delete it to free)."""
    filler = where / "filler"
    chunk = b"\xff" * 65536
    with filler.open("wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError:
            pass
    # the last partial chunk: fill the remaining blocks one byte at a time is not needed,
    # a tmpfs refuses any write that needs a page it does not have
    return filler
