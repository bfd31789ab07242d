"""The on-disk spool: every batch the collector has not acknowledged yet, oldest first.

One gzipped file per batch, holding exactly the HTTP body the shipper sends. A file is
written to ``<name>.tmp``, fsynced and renamed, so a crash leaves either a whole batch or
a ``.tmp`` that the next start removes. File names sort in creation order and carry what
the shipper needs without decoding: ``<created ns>_<boot id>_<seq>_<samples>.json.gz``.
The halves of a batch split after a 413 take its place: its creation time, and seqs
(agent/batch_split.py) that sort in sample order; a crash in the middle of a split is
settled on the next start.

The spool is bounded by size and age; past a bound the oldest batches are dropped, logged
and counted (batches and samples) in ``AgentStats``. Not thread-safe: the shipper
serialises access.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.batch_split import interrupted_splits
from agent.model import Batch, encode_batch
from agent.stats import AgentStats
from gpufleet.durable import fsync_directory

log = logging.getLogger(__name__)

_SUFFIX = ".json.gz"
_TMP_SUFFIX = _SUFFIX + ".tmp"
_NAME = re.compile(r"^(\d{20})_([A-Za-z0-9-]+)_(\d{12,19})_(\d+)\.json\.gz$")
_BOOT_ID = re.compile(r"^[A-Za-z0-9-]+$")
#: gzip level 6 is the usual speed/size balance; the agent's CPU budget is ~1 ms/sample
_GZIP_LEVEL = 6


class SpoolError(Exception):
    """A batch could not be written to the spool (disk full, permissions, ...)."""


@dataclass(frozen=True)
class SpooledBatch:
    """One batch waiting in the spool; its identity comes from the file name."""

    path: Path
    created_ns: int
    boot_id: str
    seq: int
    samples: int
    size_bytes: int


def gzip_batch(batch: Batch) -> bytes:
    """The wire body of a batch: its JSON encoding, gzipped (deterministic: mtime 0)."""
    return gzip.compress(encode_batch(batch), compresslevel=_GZIP_LEVEL, mtime=0)


def parse_name(path: Path) -> SpooledBatch | None:
    """The spooled batch a file name describes, or None when it is not one of ours."""
    match = _NAME.match(path.name)
    if match is None:
        return None
    created, boot_id, seq, samples = match.groups()
    try:
        size = path.stat().st_size
    except OSError:
        return None
    return SpooledBatch(path, int(created), boot_id, int(seq), int(samples), size)


class Spool:
    """Unacknowledged batches on disk, bounded by ``max_bytes`` and ``max_age_seconds``.

    ``clock`` gives Unix seconds; it stamps each file and decides its age. A new Spool on
    the same directory sees the batches an earlier process left there.
    """

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        max_age_seconds: float,
        stats: AgentStats | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._dir = directory
        self._max_bytes = max_bytes
        self._max_age_seconds = max_age_seconds
        self._stats = stats
        self._clock = clock
        self._entries: list[SpooledBatch] = []
        try:
            self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._entries = self._recover()
        except OSError as err:
            raise SpoolError(f"cannot use spool directory {directory}: {err}") from err
        self._publish_size()

    def append(self, batch: Batch) -> SpooledBatch:
        """Write ``batch`` durably, then drop the oldest batches past the bounds.

        Raises SpoolError when the file cannot be written; nothing partial is left behind.
        """
        entry = self._write(batch, self._next_created_ns())
        self._entries.append(entry)
        self._enforce_bounds()
        self._publish_size()
        return entry

    def split(self, entry: SpooledBatch, first: Batch, second: Batch) -> list[SpooledBatch]:
        """Put the halves of ``entry`` (agent/batch_split.py) in its place: both written
        durably, then ``entry`` removed. Raises SpoolError when a half cannot be written;
        ``entry`` then stays as it was (a crash in between is settled on the next start)."""
        halves = [self._write(first, entry.created_ns)]
        try:
            halves.append(self._write(second, entry.created_ns))
        except SpoolError:
            _unlink_quietly(halves[0].path)
            raise
        _unlink_quietly(entry.path)
        if entry in self._entries:
            at = self._entries.index(entry)
            self._entries[at : at + 1] = halves
        else:
            self._entries = sorted([*self._entries, *halves], key=_order)
        self._enforce_bounds()
        self._publish_size()
        return [h for h in halves if h in self._entries]

    def _write(self, batch: Batch, created_ns: int) -> SpooledBatch:
        if not _BOOT_ID.match(batch.agent_boot_id):
            raise ValueError(f"agent_boot_id {batch.agent_boot_id!r}: letters, digits, '-' only")
        name = f"{created_ns:020d}_{batch.agent_boot_id}_{batch.seq:012d}_{len(batch.samples)}"
        path = self._dir / (name + _SUFFIX)
        body = gzip_batch(batch)
        self._write_atomically(path, body)
        return SpooledBatch(
            path, created_ns, batch.agent_boot_id, batch.seq, len(batch.samples), len(body)
        )

    def pending(self) -> list[SpooledBatch]:
        """Every spooled batch, oldest first."""
        return list(self._entries)

    def read_body(self, entry: SpooledBatch) -> bytes | None:
        """The gzipped body of ``entry``; None when it is gone or corrupt (then removed)."""
        try:
            body = entry.path.read_bytes()
        except FileNotFoundError:
            self._forget(entry)
            return None
        except OSError as err:
            log.error("spool: cannot read %s (kept for a later try): %s", entry.path.name, err)
            return None
        if not _is_whole_gzip(body):
            self._discard_corrupt(entry)
            return None
        return body

    def remove(self, entry: SpooledBatch) -> None:
        """Delete ``entry`` (acknowledged or rejected); a missing file is not an error."""
        # A file that cannot be deleted is forgotten anyway: were it found again after a
        # restart, the collector would acknowledge it as a duplicate.
        _unlink_quietly(entry.path)
        self._forget(entry)

    def size_bytes(self) -> int:
        return sum(e.size_bytes for e in self._entries)

    def _next_created_ns(self) -> int:
        # Names must sort in creation order even if the wall clock steps back (NTP) or a
        # restarted agent's clock is behind the newest file an earlier run left.
        now_ns = int(self._clock() * 1e9)
        newest = self._entries[-1].created_ns if self._entries else 0
        return max(now_ns, newest + 1)

    def _write_atomically(self, path: Path, body: bytes) -> None:
        tmp = path.with_name(path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fsync_directory(self._dir)
        except OSError as err:
            for leftover in (tmp, path):  # never made, or removed by the next start
                with contextlib.suppress(OSError):
                    leftover.unlink(missing_ok=True)
            raise SpoolError(f"cannot write {path}: {err.strerror or err}") from err

    def _enforce_bounds(self) -> None:
        oldest_ns = int((self._clock() - self._max_age_seconds) * 1e9)
        too_old = [e for e in self._entries if e.created_ns < oldest_ns]
        if too_old:
            self._drop(too_old, f"older than {self._max_age_seconds:g} s")
        total = self.size_bytes()
        too_big: list[SpooledBatch] = []
        for entry in self._entries:
            if total <= self._max_bytes:
                break
            too_big.append(entry)
            total -= entry.size_bytes
        if too_big:
            self._drop(too_big, f"spool over {self._max_bytes} bytes")

    def _drop(self, entries: list[SpooledBatch], why: str) -> None:
        for entry in entries:
            self.remove(entry)
        samples = sum(e.samples for e in entries)
        log.warning(
            "spool: dropped the %d oldest batches (%d samples): %s", len(entries), samples, why
        )
        if self._stats is not None:
            self._stats.record_spool_drop(len(entries), samples)

    def _discard_corrupt(self, entry: SpooledBatch) -> None:
        log.error(
            "spool: removing corrupt batch file %s (%d samples lost)",
            entry.path.name,
            entry.samples,
        )
        self.remove(entry)
        if self._stats is not None:
            self._stats.record_spool_drop(1, entry.samples)
        self._publish_size()

    def _forget(self, entry: SpooledBatch) -> None:
        if entry in self._entries:
            self._entries.remove(entry)
        self._publish_size()

    def _recover(self) -> list[SpooledBatch]:
        """Batches an earlier process left, oldest first; leftovers of a crash removed."""
        entries = []
        for path in sorted(self._dir.iterdir()):
            if path.name.endswith(_TMP_SUFFIX):
                log.warning("spool: removing %s, left by a write that did not finish", path.name)
                path.unlink(missing_ok=True)
                continue
            entry = parse_name(path)
            if entry is None:
                if path.name.endswith(_SUFFIX):
                    log.warning("spool: ignoring %s: not a spool file name", path.name)
                continue
            if _is_whole_gzip(_read_or_empty(path)):
                entries.append(entry)
            else:
                self._discard_corrupt(entry)
        return self._settle_splits(entries)

    def _settle_splits(self, entries: list[SpooledBatch]) -> list[SpooledBatch]:
        """``entries`` less what a split cut short by a crash left twice (batch_split.py)."""
        twice = interrupted_splits([(e.created_ns, e.boot_id, e.seq, e.samples) for e in entries])
        kept = []
        for e in entries:
            if (e.created_ns, e.boot_id, e.seq, e.samples) not in twice:
                kept.append(e)
                continue
            log.warning("spool: removing %s, left twice by a split a crash cut short", e.path.name)
            _unlink_quietly(e.path)
        return sorted(kept, key=_order)

    def _publish_size(self) -> None:
        if self._stats is not None:
            self._stats.set_spool_size(self.size_bytes(), len(self._entries))


def _order(entry: SpooledBatch) -> tuple[int, str, int]:
    """Oldest first; the halves of a split in sample order, in the place of their batch."""
    return entry.created_ns, entry.boot_id, entry.seq


def _is_whole_gzip(body: bytes) -> bool:
    """True when ``body`` is a complete gzip stream (its CRC and length check out)."""
    if not body:
        return False
    try:
        gzip.decompress(body)
    except (OSError, EOFError, zlib.error):
        return False
    return True


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        log.error("spool: cannot remove %s: %s", path.name, err)


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
