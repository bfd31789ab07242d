"""The batch log: each acknowledged batch, as the agent sent it, until its samples are applied.

Appending a batch here is what makes it durable before the collector answers 2xx. It is a
file append, not a row of the SQLite ledger, because a row needs a transaction of its own:
~130 us of CPU per batch before any fsync (three statements, and a commit that writes four
WAL pages and the shared index), ~350 us with ``synchronous=FULL``, where one ``write`` here
costs ~4 us and the ``fdatasync`` of FULL ~80-150 us on this project's test machine
(bench/README.md).

A directory of segment files (``0000000001.seg``, ...), each a run of checksummed records
(their format, and how a damaged segment is read: log_records.py). A batch id is
``segment << 32 | n``. One process writes a segment, from its start; after a restart it
begins a new one. With ``sync`` (``ledger.synchronous=FULL``) a segment is zero-filled when
created, so each append overwrites blocks the file already has and its ``fdatasync``
journals no metadata; without, appends go to the page cache, which survives ``kill -9`` but
not a power loss (as SQLite's NORMAL). A segment that cannot be created (a full disk) is
removed at once, and the next append tries the same number again: failures leave no files.

Opening reads every segment. A damaged record costs that record alone: the records after it
are read, so their batches are replayed and their acks kept. Each damage is logged as an
ERROR naming the segment file and byte offset, and counted (``corrupt_records``, exported
as ``gpufleet_collector_intake_corrupt_records_total``). A damaged record's own ack is not
kept even where its bytes still name its batch: the ledger's ``ack_ranges`` already holds
every ack older than its last commit, and a batch acknowledged since is not applied yet,
so that ack could only turn the agent's resend, the one copy left, into a "duplicate".

A segment is deleted once every batch in it is applied and committed (``mark_done``). Which
batches are done is the ledger's to keep (``intake_done``, in the commit that applied them),
so a crash anywhere replays exactly the batches not yet applied.

On disk the log keeps its older name, "intake": the directory ``<ledger>-intake`` (store.py)
and the table ``intake_done`` (renaming either would strand an existing ledger's batches),
and so do the error messages ("intake log ..."), so that they name what is on disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collector.ledger.log_records import BatchRecord, Damage, LoggedBatch, frame, parse
from gpufleet.durable import disk_full, fsync_directory

__all__ = ["SEGMENT_BYTES", "BatchLog", "BatchLogError", "BatchRecord", "LoggedBatch"]

log = logging.getLogger(__name__)

#: a segment's size when zero-filled; one that fills up is sealed and a new one begun
SEGMENT_BYTES = 8 * 1024 * 1024
_ZEROS = bytes(1024 * 1024)


class BatchLogError(Exception):
    """The batch log cannot be opened, locked or written; the message says why."""


@dataclass
class _Segment:
    number: int
    #: ids in this segment not yet marked done
    pending: set[int] = field(default_factory=set)


class BatchLog:
    """The batch log in ``directory`` (created if missing), locked for this process; None
    keeps it in memory (a ``:memory:`` ledger). ``found`` holds every record present at
    open that checks out, in order, for the opener to take (``AcceptedBatches`` empties
    it); ``corrupt_records`` counts those that did not."""

    def __init__(
        self, directory: Path | None, *, sync: bool, segment_bytes: int = SEGMENT_BYTES
    ) -> None:
        self.directory, self.sync, self.segment_bytes = directory, sync, segment_bytes
        self._segments: dict[int, _Segment] = {}
        self._memory: dict[int, BatchRecord] = {}
        self._current: _Segment | None = None
        self._fd = self._lock_fd = -1
        self._offset = self._count = self._last_number = 0
        self.found: list[LoggedBatch] = []
        self.corrupt_records = 0
        if directory is not None:
            self._lock(directory)
            try:
                self.found = self._scan(directory)
            except BaseException:
                self.close()  # release the lock: a later open in this process may succeed
                raise

    def append(self, entries: Sequence[BatchRecord]) -> list[int]:
        """Write ``entries``; their batch ids, once durable (synced with ``sync``)."""
        if self.directory is None:
            ids = [self._next_id(1) for _ in entries]
            self._memory.update(zip(ids, entries, strict=True))
            return ids
        frames, ids = [], []
        for entry in entries:
            if self._current is None:
                self._begin_segment()
            bid = self._next_id(self._last_number)
            frames.append(frame(bid, entry))
            ids.append(bid)
        data = b"".join(frames)
        if self._offset and self._offset + len(data) > self.segment_bytes:
            self._begin_segment()  # ids name their segment: number them again
            return self.append(entries)
        assert self._current is not None
        try:
            _write_all(self._fd, data, self._offset)
            if self.sync:
                os.fdatasync(self._fd)
        except OSError as err:
            self._seal()  # what this write left in the segment is never appended to
            raise BatchLogError(_failure(f"write to {self.directory}", err)) from err
        self._offset += len(data)
        self._current.pending.update(ids)
        return ids

    def mark_done(self, batch_ids: Sequence[int]) -> list[int]:
        """Forget applied batches; deletes each sealed segment left with none pending and
        returns the numbers of the segments deleted."""
        if self.directory is None:
            for bid in batch_ids:
                self._memory.pop(bid, None)
            return []
        for bid in batch_ids:
            segment = self._segments.get(bid >> 32)
            if segment is not None:
                segment.pending.discard(bid)
        empty = [s for s in self._segments.values() if not s.pending and s is not self._current]
        for segment in empty:
            self._delete(segment)
        return [s.number for s in empty]

    def pending(self) -> list[LoggedBatch]:
        """Every batch not marked done, in order (read back from the segments)."""
        if self.directory is None:
            return [LoggedBatch(bid, e) for bid, e in sorted(self._memory.items())]
        out: list[LoggedBatch] = []
        for number in sorted(self._segments):
            pending = self._segments[number].pending
            if pending:
                data = _path(self.directory, number).read_bytes()
                out.extend(r for r in parse(data, number).records if r.batch_id in pending)
        return out

    def segments(self) -> list[int]:
        return sorted(self._segments)

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._lock_fd = -1
        self._current = None

    # -- segments -------------------------------------------------------------------------

    def _next_id(self, segment: int) -> int:
        self._count += 1
        return segment << 32 | self._count

    def _lock(self, directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            raise BatchLogError(f"intake log: cannot open {directory}: {err}") from err
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise BatchLogError(
                f"intake log {directory} is in use by another collector process: one "
                f"collector per ledger"
            ) from err

    def _scan(self, directory: Path) -> list[LoggedBatch]:
        """Read every segment, reporting its damage; those holding no record are deleted."""
        found: list[LoggedBatch] = []
        numbers = sorted(
            int(p.stem) for p in directory.glob("*.seg") if p.stem.isdigit() and p.is_file()
        )
        for number in numbers:
            path = _path(directory, number)
            records, damage = parse(path.read_bytes(), number)
            for part in damage:
                self._report(path, part)
            segment = _Segment(number, {r.batch_id for r in records})
            self._segments[number] = segment
            found.extend(records)
            if not records:
                self._delete(segment)
        self._last_number = numbers[-1] if numbers else 0
        return found

    def _report(self, path: Path, damage: Damage) -> None:
        self.corrupt_records += damage.records
        size, where = damage.end - damage.offset, f"{path} at byte offset {damage.offset}"
        if damage.cut:
            log.error(
                "intake log: the last record of segment %s does not check out (%d bytes to "
                "the end of its data) and was skipped: cut short by a crash during its write "
                "(then never acknowledged), or damaged on disk (then its batch is lost; "
                "check the disk holding it)",
                where, size,
            )  # fmt: skip
        else:
            log.error(
                "intake log: segment %s is damaged: %d bytes (%d record(s)) do not check out "
                "and were skipped, their batches lost; reading went on at byte offset %d. "
                "Check the disk holding it",
                where, size, damage.records, damage.end,
            )  # fmt: skip

    def _begin_segment(self) -> None:
        self._seal()
        assert self.directory is not None
        number = self._last_number + 1
        path = _path(self.directory, number)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as err:  # nothing created; whatever holds the name, the next goes on
            self._last_number = number
            raise BatchLogError(_failure(f"create a segment in {self.directory}", err)) from err
        try:
            if self.sync:  # zero-filled, and its name durable, before the first ack in it
                for offset in range(0, self.segment_bytes, len(_ZEROS)):
                    _write_all(fd, _ZEROS, offset)
                os.fsync(fd)
                fsync_directory(self.directory)
        except OSError as err:
            os.close(fd)
            with contextlib.suppress(OSError):  # the next try takes the same name again
                path.unlink()
            raise BatchLogError(_failure(f"create a segment in {self.directory}", err)) from err
        self._fd, self._offset, self._count = fd, 0, 0
        self._last_number = number
        self._current = self._segments[number] = _Segment(number)

    def _seal(self) -> None:
        """Stop appending to the current segment (deleted now if nothing in it is pending)."""
        current, self._current = self._current, None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if current is not None and not current.pending:
            self._delete(current)

    def _delete(self, segment: _Segment) -> None:
        assert self.directory is not None
        self._segments.pop(segment.number, None)
        _path(self.directory, segment.number).unlink(missing_ok=True)


def _path(directory: Path, number: int) -> Path:
    return directory / f"{number:010d}.seg"


def _failure(doing: str, err: OSError) -> str:
    """What failed, where, and what to do; a full disk said in so many words."""
    if disk_full(err):
        return (
            f"intake log: cannot {doing}: the disk is full ({err.strerror}); free space "
            f"there (batches are refused until then)"
        )
    return f"intake log: cannot {doing}: {err}"


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written
