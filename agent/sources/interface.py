"""The interface every GPU source implements: NVML, the simulator, a replayed trace."""

from __future__ import annotations

from typing import Protocol

from agent.model import GpuInfo, GpuSample


class SourceError(Exception):
    """A source cannot be started or read at all (NVML missing, trace unreadable, ...).

    Per-GPU failures are not raised: they come back as samples with ``healthy=False``.
    """


class GpuSource(Protocol):
    """Reads every GPU (and MIG instance) of one node."""

    def discover(self) -> list[GpuInfo]:
        """The GPUs and MIG instances this source reports, in index order."""
        ...

    def read(self, now: float) -> list[GpuSample]:
        """One sample per GPU/MIG instance, timestamped ``now`` (Unix seconds).

        Never raises for one bad GPU or field: that GPU's sample has ``healthy=False``
        or ``None`` fields.
        """
        ...

    def close(self) -> None:
        """Release the source's resources (NVML shutdown, open files)."""
        ...
