"""Each node's clock against the collector's, measured from ``Batch.sent_at`` on arrival.

Samples carry the agent's clock. A batch built at ``sent_at`` (agent clock) arrives at
``arrived_at`` (collector clock) after a delay that is never negative: the network, a
retry, hours in the spool. So ``sent_at - arrived_at`` is the node's offset minus that
delay, and the largest value over the node's recent batches is the offset with the least
delay in it (NTP's minimum-delay filter): a backlog drained from a spool, which waited
long, cannot pull the estimate, and a clock stepped by NTP is followed within
``WINDOW_SECONDS`` (at once when it steps ahead).

The offset is positive when the node's clock is ahead: node time = collector time +
offset. ``offset`` is the correction readers apply (staleness, windows, the view's times),
in whole seconds and moved only when the estimate leaves it by more than
``STEADY_SECONDS`` and ``AGREEING_BATCHES`` batches agree: a view's ``idle_since`` is an
idle episode's identity (the action log keys on it), so it must not jitter by the
milliseconds each new batch moves the estimate. The ledger keeps each node's samples on
the node's own clock (its hours are cut on it): that is what GpufleetNodeClockSkew warns
about.

Offsets past ``MAX_OFFSET_SECONDS`` are not a clock to correct (a reset RTC, a
``sent_at`` that is not a time): they are not used, and the node's samples are judged on
the collector's clock alone.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

#: how long (collector clock) a measurement counts towards the node's estimate
WINDOW_SECONDS = 300.0
#: a node back after a silence longer than the window keeps its old measurements until
#: its new ones span this long: the first batches after an outage are its spool's backlog
SETTLE_SECONDS = 60.0
#: a node whose last batch is this much older than the fleet's latest leaves estimates()
FORGET_AFTER_SECONDS = 3600.0
#: at most this many measurements per node are kept (one per batch)
MAX_MEASUREMENTS = 128
#: a clock further off than this (either way) is broken, not skewed: never corrected for
MAX_OFFSET_SECONDS = 86400.0
#: the correction follows the estimate once they differ by more than this...
STEADY_SECONDS = 1.0
#: ...and this many batches in a row agree on the new value (within STEADY_SECONDS): a
#: clock running at another rate (a replay of history shipped as fast as it goes) or a
#: backlog of batches each delayed differently is no offset to correct
AGREEING_BATCHES = 3


class NodeClocks:
    """Per node, the clock offset estimated from the batches it sent. Thread-safe: ingest
    measures, the applier and readers ask. An offset under ``min_correction_seconds`` is
    reported (``estimates``) but not corrected: a synchronised clock whose batches all
    take that long to arrive is not skewed."""

    def __init__(self, min_correction_seconds: float = 0.0) -> None:
        self.min_correction_seconds = min_correction_seconds
        self._lock = threading.Lock()
        #: node -> (arrived_at, sent_at - arrived_at) of its recent batches, oldest first
        self._measured: dict[str, list[tuple[float, float]]] = {}
        #: node -> the raw estimate (for /metrics), and the steady correction
        self._estimates: dict[str, float] = {}
        self._offsets: dict[str, float] = {}
        #: node -> (an estimate, how many batches in a row have agreed with it)
        self._candidates: dict[str, tuple[float, int]] = {}

    def measure(self, node: str, sent_at: float, arrived_at: float) -> float:
        """Count one batch of ``node``; returns the node's offset correction (seconds, node
        ahead positive; 0.0 while nothing sane was measured)."""
        offset = sent_at - arrived_at
        if not -MAX_OFFSET_SECONDS <= offset <= MAX_OFFSET_SECONDS:  # NaN fails too
            return self.offset(node)
        with self._lock:
            window = self._measured.setdefault(node, [])
            window.append((arrived_at, offset))
            _expire(window)
            estimate = self._estimates[node] = max(o for _, o in window)
            value, agreeing = self._candidates.get(node, (estimate, 0))
            if abs(estimate - value) > STEADY_SECONDS:
                value, agreeing = estimate, 0
            self._candidates[node] = (value, agreeing + 1)
            steady = self._offsets.get(node, 0.0)
            if agreeing + 1 >= AGREEING_BATCHES and abs(value - steady) > STEADY_SECONDS:
                corrected = abs(value) >= self.min_correction_seconds
                self._offsets[node] = float(round(value)) if corrected else 0.0
            return self._offsets.get(node, 0.0)

    def offset(self, node: str) -> float:
        """The correction for the node's clock: node time minus collector time, whole
        seconds (0.0 while nothing sane was measured)."""
        return self._offsets.get(node, 0.0)

    def forget(self, nodes: Iterable[str]) -> None:
        """Drop what was measured of ``nodes`` (forgotten: none of their GPUs is live)."""
        with self._lock:
            for node in nodes:
                for book in (self._measured, self._estimates, self._offsets, self._candidates):
                    book.pop(node, None)

    def estimates(self) -> dict[str, float]:
        """Each node's offset estimate in seconds, node ahead positive, for the nodes heard
        from within ``FORGET_AFTER_SECONDS`` of the latest batch: a node taken out of the
        fleet leaves /metrics (and stops the skew alert) instead of staying at its last value."""
        with self._lock:
            last = {node: max(a for a, _ in w) for node, w in self._measured.items() if w}
            if not last:
                return {}
            newest = max(last.values())
            return {
                node: estimate
                for node, estimate in self._estimates.items()
                if last.get(node, -math.inf) >= newest - FORGET_AFTER_SECONDS
            }


def _expire(window: list[tuple[float, float]]) -> None:
    """Drop measurements that arrived a window before the newest, keeping at least
    ``SETTLE_SECONDS`` of history; past ``MAX_MEASUREMENTS``, drop the most delayed
    (lowest offset), which the estimate (the highest) never uses."""
    newest = max(a for a, _ in window)
    while (
        len(window) > 1
        and window[0][0] < newest - WINDOW_SECONDS
        and window[1][0] <= newest - SETTLE_SECONDS
    ):
        del window[0]
    if len(window) > MAX_MEASUREMENTS:
        del window[min(range(len(window)), key=lambda i: window[i][1])]
