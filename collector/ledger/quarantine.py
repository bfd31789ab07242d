"""Quarantine: acknowledged batches the collector cannot apply, kept aside so that they never
block the others.

A batch in the intake log is replayed after every restart until a commit marks it applied.
One that cannot be applied (its body no longer decodes or passes today's rules, it holds a
value the ledger cannot store, buffering it raises) would otherwise be replayed, and fail,
forever, and a value SQLite cannot bind (an integer of 2**63 or more) fails every commit of
the whole fleet. So such a batch is copied here and then marked done in the next commit like
an applied one; the intake log forgets it as usual.

Why files in ``<ledger>-intake/quarantine/`` and not a table: the quarantine must work while
the ledger cannot write (that is often why a batch is here), it sits beside the log it
came from, and an operator can read a batch (``<id>.batch``: its JSON as the agent sent
it, decompressed) to see what is wrong and report it, then delete it. Its samples are not
in the ledger; sending it again as it is would count as a repeat of an acknowledged batch
(its seq is acknowledged) and change nothing. ``<id>.json`` says what it was and why it
is here; it is written last (and atomically), so a batch counts once its reason is on
disk. A memory ledger keeps its quarantine in memory. PostgreSQL keeps a quarantined
batch in its ``intake_batches`` row (``quarantined``, with ``quarantined_at`` and
``quarantine_error``): no collector disk, and a restarted collector counts it again from
there.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from collector.health import QuarantinedBatch
from collector.ledger.batch_log import LoggedBatch
from gpufleet.durable import fsync_directory

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QuarantineSummary:
    """For health and metrics: how many batches are quarantined, and the newest."""

    count: int = 0
    newest: QuarantinedBatch | None = None


class Quarantine:
    """The batches set aside in ``directory`` (created on first use; None: in memory, or
    in the engine's own rows: PostgreSQL's, handed over as ``earlier`` at start)."""

    def __init__(
        self,
        directory: Path | None,
        earlier: Iterable[QuarantinedBatch] = (),
        kept_in: str = "this process's memory only",
    ) -> None:
        """``kept_in``: where a batch is kept without a directory (``{id}``: its id)."""
        self.directory = directory
        self.kept_in = kept_in
        self._lock = threading.Lock()
        self._count = 0
        self._newest: QuarantinedBatch | None = None
        for entry in earlier:
            self._note(entry)
        if directory is not None and directory.is_dir():
            for meta in sorted(directory.glob("*.json")):
                found = _read(meta)
                if found is not None:
                    self._note(found)

    def keep(self, logged: LoggedBatch, json_body: bytes, error: str, now: float) -> None:
        """Copy ``logged`` (its body as JSON) aside, durably, and log it once at ERROR.
        Raises OSError when it cannot be written (the batch then stays in the log)."""
        e = logged.entry
        entry = QuarantinedBatch(
            logged.batch_id, e.node, e.boot_id, e.seq, e.received_at, e.sample_count, now, error
        )
        if self.directory is not None:
            self._write(entry, json_body)
        with self._lock:
            self._note(entry)
        if self.directory is not None:
            kept = f"{self.directory / str(logged.batch_id)}.batch (and .json: why)"
        else:
            kept = self.kept_in.format(id=logged.batch_id)
        log.error(
            "batch %d (node %s, agent boot %s, seq %d) cannot be applied and is quarantined: "
            "%s; the other batches go on. Its samples are not in the ledger, and a resend as "
            "it is counts as a repeat of an acknowledged batch; the batch is kept in %s to "
            "inspect or report (then delete it)",
            logged.batch_id,
            e.node,
            e.boot_id,
            e.seq,
            error,
            kept,
        )

    def summary(self) -> QuarantineSummary:
        with self._lock:
            return QuarantineSummary(self._count, self._newest)

    def _note(self, entry: QuarantinedBatch) -> None:
        self._count += 1
        if self._newest is None or entry.quarantined_at >= self._newest.quarantined_at:
            self._newest = entry

    def _write(self, entry: QuarantinedBatch, json_body: bytes) -> None:
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        stem = self.directory / f"{entry.batch_id}"
        _write_durably(stem.with_suffix(".batch"), json_body)
        _write_durably(stem.with_suffix(".json"), msgspec.json.encode(entry))
        fsync_directory(self.directory)


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read(meta: Path) -> QuarantinedBatch | None:
    try:
        return msgspec.json.decode(meta.read_bytes(), type=QuarantinedBatch)
    except (OSError, msgspec.DecodeError):
        log.warning("quarantine: %s cannot be read; not counted", meta)
        return None
