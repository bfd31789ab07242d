"""Which of a GPU's buffered readings are due: the reorder window, and holes held open.

Both decisions are per GPU, in its node's event time, never against the collector's clock
(a node's clock may be minutes off, and a backlog drained from a spool is hours old):

- **The window.** A reading is due once the GPU has sent one ``reorder_window_seconds``
  newer (event time). When nothing came for the GPU for a window of the collector's
  clock, everything buffered is due: a GPU that went quiet is applied a window later, not
  at shutdown.
- **Holes.** A gap longer than ``stale_after_seconds`` after the last applied reading is a
  hole that older batches may still fill: an agent draining its spool newest first, a
  batch retried after a newer one. Readings past a hole wait up to
  ``backfill_wait_seconds`` (collector clock, from when the hole was first due) for the
  batches that fill it; once it is filled they apply in order, and once the wait is over
  the hole is accounted as unknown time. A GPU never applied waits the same, from the
  arrival of its first batch: the collector cannot know what came before its first
  reading, and the batches before it may be the next to arrive.
"""

from __future__ import annotations

import bisect
import math
import operator
from typing import NamedTuple

from collector.fleet.readings import Reading
from collector.fleet.rules import FleetRules

_timestamp = operator.attrgetter("timestamp")
#: a new GPU's first batch this far past its agent's first: wait the whole time, not per seq
MAX_AWAITED_BATCHES = 64


def window_ready(
    queue: list[Reading],
    newest: float,
    arrived_at: float | None,
    now: float | None,
    rules: FleetRules,
) -> int:
    """How many of ``queue`` (event-time order) are past the reorder window. ``newest``:
    the GPU's newest reading; ``arrived_at``: when its last samples came (collector clock,
    None: unknown); ``now``: the collector's clock (None: judge by event time alone)."""
    window = rules.reorder_window_seconds
    if now is not None and (arrived_at is None or now - arrived_at >= window):
        return len(queue)  # the GPU went quiet
    horizon = newest - window
    if queue[0].timestamp > horizon:  # the usual tick: nothing is due yet
        return 0
    return bisect.bisect_right(queue, horizon, key=_timestamp)


class Hole(NamedTuple):
    """A hole a GPU's buffer waits at: the event time it starts at (the reading before it;
    -inf before a new GPU's first reading), and when it was first due (collector clock)."""

    after: float
    due_at: float


class Backfill:
    """What one GPU's buffer waits for before it applies past a hole."""

    __slots__ = ("_before_first", "_first_noted", "hole")

    def __init__(self) -> None:
        #: the hole waited at, if any
        self.hole: Hole | None = None
        #: a new GPU's first batch: its agent boot, and the seqs before it not seen yet
        #: (None: too many to list; wait the whole time)
        self._before_first: tuple[str, set[int] | None] | None = None
        self._first_noted = False

    def note_batch(self, applied: bool, boot_id: str, seq: int, arrived_at: float | None) -> None:
        """A batch brought the GPU samples. A GPU never ``applied`` whose first batch is
        not its agent's first (seq > 1) waits, from that arrival, for the batches before
        it, until they have all come or the wait is over."""
        if applied or arrived_at is None:
            return
        if not self._first_noted:
            self._first_noted = True
            if self.hole is None and seq > 1:
                self.hole = Hole(-math.inf, arrived_at)
                missing = set(range(1, seq)) if seq <= MAX_AWAITED_BATCHES else None
                self._before_first = (boot_id, missing)
            return
        if self._before_first is None:
            return
        boot, missing = self._before_first
        if boot == boot_id and missing is not None:
            missing.discard(seq)
            if not missing:  # every batch before the first has come: no need to wait
                self._before_first, self.hole = None, None

    def ready(
        self, queue: list[Reading], ready: int, last: float | None, now: float, rules: FleetRules
    ) -> int:
        """How many of the ``ready`` readings to apply: those before the first hole after
        ``last`` (the last applied reading's time; None for a new GPU, which waits only
        as ``note_batch`` decided), all once the hole has waited ``backfill_wait_seconds``."""
        if last is None:
            if self.hole is None:
                return ready
            fits, after = 0, -math.inf
        else:
            fits = before_hole(queue, ready, last, rules.stale_after_seconds)
            if fits == ready:
                self.hole = None
                return ready
            after = queue[fits - 1].timestamp if fits else last
        hole = self.hole
        if hole is None or hole.after != after:
            hole = self.hole = Hole(after, now)
        if fits:
            return fits
        if now - hole.due_at < rules.backfill_wait_seconds:
            return 0
        self.hole = None  # waited long enough: the gap is unknown time
        return ready


def before_hole(queue: list[Reading], ready: int, last: float, stale: float) -> int:
    """How many of the first ``ready`` readings come before the first hole after ``last``
    (the last applied reading's time)."""
    prev = last
    for i in range(ready):
        ts = queue[i].timestamp
        if ts - prev > stale:
            return i
        prev = ts
    return ready
