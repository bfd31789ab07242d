"""The ledger's files, checked before SQLite opens them: the database, its ``-wal`` and
``-shm`` beside it, and the directory that holds them.

SQLite opens a database it cannot write read-only, without a word, and fails at the first
write ("attempt to write a readonly database", naming no file). Worse, opening it creates
the ``-wal`` and ``-shm`` files with the database file's mode: a read-only ledger leaves a
read-only ``-shm``, and once the ledger's mode is fixed SQLite, finding a ``-shm`` it cannot
write, still opens read-only; the start failed again until the stale ``-shm`` was removed
by hand. So the files are checked first, and a start is refused naming the file and the
fix before SQLite creates anything. A ``-wal`` or ``-shm`` this process cannot write, beside
a ledger it can, gets the ledger's mode back (the shared-memory index holds nothing durable,
and its content is left as it is); where that is not permitted, the start names it too.

``os.access`` answers for this process: a read-only mount refuses even root, and file modes
refuse everyone else.

``low_space`` is the readiness check's look at the volume: a commit comes only every
``ingest.commit_interval_seconds`` (60 s by default) and, at ``synchronous=FULL``, appends go
to a segment zero-filled in advance, so a full disk may fail no write for a minute. The free
space answers at once, and says when space is back without waiting for a write to succeed.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from collector.ledger.batch_log import SEGMENT_BYTES
from collector.ledger.records import LedgerError

log = logging.getLogger(__name__)

_FIX = "or mount its volume read-write"


def check_writable(path: str) -> None:
    """Raise LedgerError naming the file and the fix when the ledger at ``path`` cannot be
    written; restore the mode of a stale ``-wal``/``-shm`` (see the module docstring)."""
    db = Path(path)
    folder = db.parent
    if not folder.is_dir():
        raise LedgerError(
            f"ledger: cannot open {path!r}: the directory {folder} does not exist; create it "
            f"or point ledger.url elsewhere"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise LedgerError(
            f"ledger: the directory {folder} is not writable by this process "
            f"({_who()}); SQLite writes the ledger's -wal and -shm files there: make it "
            f"writable ({_FIX})"
        )
    if not db.exists():
        return
    if not os.access(db, os.W_OK):
        raise LedgerError(
            f"ledger: {db} is not writable by this process ({_who()}): make it writable "
            f"(chmod u+w, chown it to the collector's user, {_FIX})"
        )
    for suffix in ("-wal", "-shm"):
        side = Path(path + suffix)
        if side.exists() and not os.access(side, os.W_OK):
            _restore_mode(side, db)


def _restore_mode(side: Path, db: Path) -> None:
    mode = stat.S_IMODE(db.stat().st_mode)
    try:
        os.chmod(side, mode)
    except OSError as err:
        raise LedgerError(
            f"ledger: {side} is not writable by this process ({_who()}) and its mode cannot "
            f"be restored ({err}): stop every collector on this ledger, then chown it to "
            f"the collector's user or delete it (SQLite rebuilds it)"
        ) from err
    log.warning("ledger: %s was not writable; given the ledger file's mode %o", side, mode)


def _who() -> str:
    return f"uid {os.getuid()}"


#: free space the write path needs: a new intake segment (zero-filled to its full size at
#: FULL; at NORMAL it grows as batches come, so room for its first batches) and the WAL
NEEDED_FREE_BYTES_FULL = 2 * SEGMENT_BYTES
NEEDED_FREE_BYTES_NORMAL = 1024 * 1024


def low_space(folder: Path, sync: bool) -> str | None:
    """What is wrong when the volume holding ``folder`` has less free space than the write
    path needs (``sync``: ``ledger.synchronous=FULL``); None when it has enough or cannot say."""
    need = NEEDED_FREE_BYTES_FULL if sync else NEEDED_FREE_BYTES_NORMAL
    try:
        vfs = os.statvfs(folder)
    except OSError:
        return None
    free = vfs.f_bavail * vfs.f_frsize
    if free >= need:
        return None
    return (
        f"the volume holding {folder} has {free} bytes free; the ledger and its intake log "
        f"need {need} (disk_full): free space on it"
    )
