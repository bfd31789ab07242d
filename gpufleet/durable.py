"""Durable-file helpers shared by the agent's spool and the collector's batch log."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Make ``directory``'s entries durable: a new or renamed file in it survives a power
    loss only once this returns (the spool's renames, the collector's batch-log segments)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
