"""Durable-file helpers shared by the agent's spool and the collector's batch log."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` says the volume has no space left (or the quota is used up)."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


def fsync_directory(directory: Path) -> None:
    """Make ``directory``'s entries durable: a new or renamed file in it survives a power
    loss only once this returns (the spool's renames, the collector's batch-log segments)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
