"""What the shipper says and counts about each answer: once per streak, every loss.

A collector that keeps refusing, or keeps warning, would otherwise write one line per batch
per retry. So a problem is logged when a streak of it starts (and again after a delivery
ended the streak), while every attempt is counted in AgentStats. A batch that is lost is
the exception: each loss gets its own ERROR line naming the batch.
"""

from __future__ import annotations

import logging

from agent.model import BatchAck
from agent.refusals import advice, held_label
from agent.shipping_policy import ShipOutcome, Verdict
from agent.stats import AgentStats

log = logging.getLogger("agent.shipper")


class ShippingLog:
    """Log lines and counts for one shipper's answers; called from its sending thread."""

    def __init__(self, node: str, stats: AgentStats) -> None:
        self._node = node
        self._stats = stats
        #: problems already logged in the current streak of failures
        self._complaints: set[str] = set()
        self._ack_warned = False

    def answered(self, verdict: Verdict, boot_id: str, seq: int, samples: int) -> None:
        """Count and, once per streak, log what the answer to batch ``(boot_id, seq)`` was."""
        outcome = verdict.outcome
        if outcome is ShipOutcome.ACKED:
            self._complaints.clear()
            self._stats.set_retry_after(0.0)
            if verdict.ack is not None:
                self._acked(verdict.ack)
            return
        self._stats.record_batch_failed()
        if outcome is ShipOutcome.REJECTED:
            self._stats.record_refused(verdict.reason)
            self.lost(
                boot_id, seq, samples, f"the collector refused it for good ({verdict.message})"
            )
        elif outcome is ShipOutcome.SPLIT:
            self._stats.record_split()
            self._once(
                logging.WARNING,
                "split",
                f"batch {boot_id}/{seq} of {samples} samples was too large (HTTP "
                f"{verdict.status}: {verdict.message}); "
                "it and any other too large are sent again in halves",
            )
        elif outcome is ShipOutcome.HELD:
            self._stats.record_held(held_label(verdict.reason))
            self._once(
                logging.ERROR,
                verdict.reason,
                f"HTTP {verdict.status}: {advice(verdict.reason, verdict.clock_ahead_seconds)}; "
                f"it said {verdict.message!r}; batches stay spooled and are retried",
            )
        else:
            said = (
                f"HTTP {verdict.status}: {verdict.message}" if verdict.status else verdict.message
            )
            self._once(
                logging.WARNING, verdict.reason, f"{said}; batches stay spooled and are retried"
            )

    def asked_to_wait(self, seconds: float) -> None:
        """The collector's ``Retry-After``, clamped: shown until the next delivery."""
        self._stats.set_retry_after(seconds)

    def lost(self, boot_id: str, seq: int, samples: int, why: str) -> None:
        """One batch is gone for good: logged with its identity, counted as a drop."""
        self._stats.record_spool_drop(1, samples)
        log.error(
            "shipper: batch %s/%d of node %s (%d samples) is lost: %s",
            boot_id,
            seq,
            self._node,
            samples,
            why,
        )

    def complain(self, kind: str, message: str) -> None:
        """A problem of the shipper's own (not an answer), logged once per streak."""
        self._once(logging.ERROR, kind, message)

    def _once(self, level: int, kind: str, message: str) -> None:
        if kind not in self._complaints:
            self._complaints.add(kind)
            log.log(level, "shipper: %s", message)

    def _acked(self, ack: BatchAck) -> None:
        if ack.samples_late > 0:
            self._stats.record_late(ack.samples_late)
        if not ack.warnings and ack.samples_late <= 0:
            self._ack_warned = False
            return
        if self._ack_warned:
            return
        self._ack_warned = True
        first = ack.warnings[0] if ack.warnings else "no warning given"
        log.warning(
            "shipper: the collector accepted batch %s/%d with %d samples late and a warning: "
            "%s (logged once until an ack comes clean; late samples are counted in "
            "gpufleet_agent_samples_late_total)",
            ack.agent_boot_id,
            ack.seq,
            ack.samples_late,
            first[:300],
        )
