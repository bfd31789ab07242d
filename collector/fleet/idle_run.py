"""The idle run a GPU is in now, counting samples not yet applied.

A GPU's idle episodes come from applied samples, which trail the newest by the reorder
window and the apply interval. The fleet view's ``idle_since`` must not: a short burst still
in the buffer ends the idle run now, not a window later (else a release could open early).
``IdleRun`` follows the trailing run of idle readings over every reading in event-time
order with the episode rules of state.py (same holder, no gap longer than stale), so it
starts where the apply step's episode will start.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.fleet.rules import FleetRules


@dataclass(slots=True)
class IdleRun:
    """The trailing idle run as of the reading at ``last`` (event time)."""

    #: the rules and the GPU's ``dram_seen`` the readings were classified with
    rules: FleetRules
    dram_seen: bool
    last: float
    #: when the run began; None when the reading at ``last`` was not idle
    start: float | None
    #: the run's holder (the first workload's key; None: unallocated)
    holder: str | None

    def follow(self, timestamp: float, holder: str | None, idle: bool) -> None:
        """Take the next reading (``timestamp`` > ``last``) into account."""
        if not idle:
            self.start = None
        elif (
            self.start is None
            or holder != self.holder
            or timestamp - self.last > self.rules.stale_after_seconds
        ):
            self.start, self.holder = timestamp, holder
        self.last = timestamp
