"""A simulated node whose clock is off: its agent stamps what the GPUs truly do with the
node's own time, ``offset_seconds`` ahead of the true time (negative: behind), as a node
with a drifted or misconfigured clock does."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from agent.model import GpuInfo, GpuSample
from agent.sources.simulated.source import SimulatedNode


class SkewedClock:
    """A node's wall clock: the simulated one, ``offset_seconds`` ahead (negative: behind)."""

    def __init__(self, clock: Callable[[], float], offset_seconds: float) -> None:
        self.clock, self.offset_seconds = clock, offset_seconds

    def __call__(self) -> float:
        return self.clock() + self.offset_seconds


class SkewedNode:
    """A simulated node read by an agent whose clock is ``offset_seconds`` off: the GPUs do
    what they truly do at the true time, and the samples carry the node's clock."""

    def __init__(self, node: SimulatedNode, offset_seconds: float) -> None:
        self.node, self.offset_seconds = node, offset_seconds

    def discover(self) -> list[GpuInfo]:
        return self.node.discover()

    def read(self, now: float) -> list[GpuSample]:
        true_now = now - self.offset_seconds
        return [
            msgspec.structs.replace(s, timestamp=s.timestamp + self.offset_seconds)
            for s in self.node.read(true_now)
        ]

    def close(self) -> None:
        self.node.close()
