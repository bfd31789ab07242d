"""Since when each holder of a shared GPU has been idle on its own, for the live view.

A holder of a shared GPU (analysis/shared.py) is idle while its own SM share stays below
the idle threshold, even while the GPU is busy with another holder. ``HolderIdle`` follows
that per holder over applied readings, in event-time order, with the episode rules of
state.py: a gap longer than stale, or the holder leaving the GPU, ends its run. The view
trails the newest reading by the reorder window; a buffered reading where the holder is
active (or gone, or the GPU is unknown) ends its run at once, so a release never opens on
readings the apply step would contradict.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from collector.analysis.shared import holder_activity
from collector.fleet.readings import Reading
from collector.records import IDLE, Activity


@dataclass(slots=True)
class HolderIdle:
    """Per holder key: the start of its current idle run (applied readings only)."""

    since: dict[str, float] = field(default_factory=dict)

    def follow(self, reading: Reading, activity: Activity, gap_ok: bool, threshold: float) -> None:
        """Take the next applied reading (``activity``: the GPU's) into account."""
        sharing = reading.holders.sharing
        if sharing is None:
            if self.since:
                self.since = {}
            return
        since = self.since if gap_ok else {}
        kept: dict[str, float] = {}
        for ref, own in sharing.sm_shares.items():
            if holder_activity(activity, own, threshold) is IDLE:
                kept[ref.key] = since.get(ref.key, reading.timestamp)
        self.since = kept

    def now(
        self, buffered: Iterable[tuple[Reading, Activity]], threshold: float
    ) -> dict[str, float]:
        """The runs as of the newest reading: those a buffered reading does not end."""
        current = dict(self.since)
        for reading, activity in buffered:
            if not current:
                break
            sharing = reading.holders.sharing
            idle = (
                set()
                if sharing is None
                else {
                    ref.key
                    for ref, own in sharing.sm_shares.items()
                    if holder_activity(activity, own, threshold) is IDLE
                }
            )
            current = {key: start for key, start in current.items() if key in idle}
        return current
