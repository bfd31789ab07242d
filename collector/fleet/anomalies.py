"""Samples the live fleet takes but cannot account as measured, made loud.

A sample behind event time already applied for its GPU (a node clock that stepped back,
or forward and back; a batch held too long) is not accounted, and the batch is still
acknowledged: the sender learns it from the ack's ``samples_late`` and ``warnings``, the
operator from one WARNING per node and streak (a streak ends with a batch of the node
that is on time), and both from ``gpufleet_collector_late_samples_total{reason}``. An
energy-counter delta past what the GPU can draw (collector/analysis/physical.py) is
estimated from power instead: counted in
``gpufleet_collector_implausible_samples_total{field}`` and logged once per GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.model import Batch
from collector.backend import ImplausibleField, LateReason

log = logging.getLogger(__name__)


class Anomalies:
    """Counts (through ``count_late`` and ``count_implausible``) and logs; ``offset_of``
    gives a node's clock offset (fleet/clocks.py) for the words. Called with the fleet's
    lock held."""

    def __init__(
        self,
        count_late: Callable[[int, LateReason], None],
        count_implausible: Callable[[ImplausibleField, int], None],
        offset_of: Callable[[str], float],
    ) -> None:
        self._count_late = count_late
        self._count_implausible = count_implausible
        self._offset_of = offset_of
        #: nodes in a streak of batches with late samples
        self._late_nodes: set[str] = set()
        #: GPUs whose energy counter jumped, logged once each
        self._implausible_gpus: set[str] = set()

    def late(self, batch: Batch, samples: int, behind_seconds: float) -> str:
        """Count ``samples`` of ``batch`` as late, up to ``behind_seconds`` behind their
        GPUs' applied time; the sentence telling the sender, logged when a streak starts."""
        self._count_late(samples, LateReason.BEHIND_APPLIED)
        offset = self._offset_of(batch.node)
        warning = (
            f"{samples} of {len(batch.samples)} samples were up to {behind_seconds:.0f} s "
            "behind event time the collector had already applied for their GPUs and were "
            f"not accounted (the node's clock is {offset:+.0f} s off the collector's): check "
            "the node's clock (chrony/NTP), or whether batches wait too long to be sent"
        )
        if batch.node not in self._late_nodes:
            self._late_nodes.add(batch.node)
            log.warning(
                "node %s, batch %s/%d: %s; counted in gpufleet_collector_late_samples_total, "
                "logged once until a batch of the node is on time again",
                batch.node,
                batch.agent_boot_id,
                batch.seq,
                warning,
            )
        return warning

    def on_time(self, node: str) -> None:
        """A batch of ``node`` had no late sample: its streak, if any, is over."""
        self._late_nodes.discard(node)

    def duplicates(self, samples: int) -> None:
        """``samples`` at a timestamp their GPU had already applied."""
        self._count_late(samples, LateReason.DUPLICATE_TIMESTAMP)

    def implausible_energy(self, uuid: str, node: str, intervals: int, max_watts: float) -> None:
        """``intervals`` of GPU ``uuid`` whose counter rose past ``max_watts``."""
        self._count_implausible(ImplausibleField.ENERGY_JOULES, intervals)
        if uuid not in self._implausible_gpus:
            self._implausible_gpus.add(uuid)
            log.warning(
                "GPU %s on node %s: its energy counter rose by more than the %g W it can "
                "draw over an interval; that interval's energy is estimated from its power "
                "instead; counted in gpufleet_collector_implausible_samples_total, logged "
                "once per GPU",
                uuid,
                node,
                max_watts,
            )
