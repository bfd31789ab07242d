"""The rules every tracked GPU is judged by: idle threshold, staleness, reorder window,
how long a hole waits for the batches that fill it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FleetRules:
    idle_threshold: float
    stale_after_seconds: float
    reorder_window_seconds: float
    #: closed idle episodes shorter than this are not reported (their seconds still count)
    min_episode_seconds: float = 0.0
    #: readings past a hole wait this long (collector clock) for older batches to fill it
    backfill_wait_seconds: float = 0.0
