"""Samples lost and counted twice: the ledger held to the simulator's ground truth.

The ledger keeps no samples, only what they add up to per GPU: joules, and seconds known
(active or idle) or unknown. The fault tests run with ``analysis.stale_after_seconds``
under two sampling steps, so every sample missing between two the ledger has turns its
intervals unknown; a GPU that lost nothing has all its seconds known, from its first
sample to its last, and the simulator's joules over them. Hence, per GPU:

- ``missing_intervals``: sampling steps the ledger does not know, round((true - known) /
  step); a run of k lost samples inside the history is k + 1 steps (k at either end), so
  samples lost <= missing intervals, and 0 means 0;
- counted twice: seconds (known + unknown) or joules above the truth beyond rounding, or a
  sample the collector acknowledged as new twice (wire.py).

``settle`` applies what a killed collector left acknowledged but unapplied, the way the
command's next start would, so the ledger can be read whole.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.sources.simulated.truth import GroundTruth
from collector.ledger.store import Ledger
from gpufleet.cli.collector import build_collector, settings_from_args
from tests.faults.rig import STEP_SECONDS, SimAgent, spans_of
from tests.faults.wire import Exchange, SampleKey, accepted_samples, acknowledged_samples

#: what the ledger's sums may differ from the simulator's exact joules by (rounding, the
#: counter's millijoule steps); one batch of a node counted twice is far above it
ENERGY_TOLERANCE = 0.005


@dataclass(frozen=True)
class GpuTotals:
    uuid: str
    energy_joules: float
    true_energy_joules: float
    known_seconds: float
    unknown_seconds: float
    true_seconds: float


@dataclass(frozen=True)
class Tally:
    step_seconds: float
    gpus: dict[str, GpuTotals]
    #: GPUs the simulator sampled that the ledger never heard of
    absent: frozenset[str]
    pending_batches: int

    def missing_intervals(self, uuid: str) -> int:
        g = self.gpus[uuid]
        return round((g.true_seconds - g.known_seconds) / self.step_seconds)

    @property
    def lost_intervals(self) -> int:
        return sum(self.missing_intervals(u) for u in self.gpus) + len(self.absent)

    @property
    def double_counted_gpus(self) -> list[str]:
        """GPUs with more seconds or joules in the ledger than the simulator produced."""
        over = []
        for g in self.gpus.values():
            seconds = g.known_seconds + g.unknown_seconds
            if seconds > g.true_seconds + 1e-6 or g.energy_joules > g.true_energy_joules * (
                1 + ENERGY_TOLERANCE
            ):
                over.append(g.uuid)
        return over

    def energy_errors(self) -> dict[str, float]:
        return {
            u: abs(g.energy_joules - g.true_energy_joules) / max(g.true_energy_joules, 1e-9)
            for u, g in self.gpus.items()
        }


def settle(config: Path, db: Path) -> None:
    """Start the collector once more on ``db`` without HTTP and stop it cleanly: what was
    acknowledged is replayed, and stopping applies and commits it all."""
    args = argparse.Namespace(config=config, host=None, port=None, db=str(db))
    build_collector(settings_from_args(args), tokens=frozenset(["unused"])).stop()


def ledger_tally(
    db: Path, truth: GroundTruth, spans: Mapping[str, tuple[float, float]], step_seconds: float
) -> Tally:
    """The ledger's totals per GPU against ``truth`` over each GPU's sampled span."""
    with Ledger.open(str(db)) as ledger:
        pending = len(ledger.pending_batches())
        usage = {gpu.uuid: u for gpu, u in ledger.usage_totals_by_gpu()}
    gpus = {}
    for uuid, (first, last) in spans.items():
        if uuid not in usage:
            continue
        u = usage[uuid]
        gpus[uuid] = GpuTotals(
            uuid=uuid,
            energy_joules=u.energy_joules,
            true_energy_joules=truth.true_energy_joules(uuid, first, last),
            known_seconds=u.active_seconds + u.idle_seconds,
            unknown_seconds=u.unknown_seconds,
            true_seconds=last - first,
        )
    absent = frozenset(spans) - frozenset(gpus)
    return Tally(step_seconds, gpus, absent, pending)


@dataclass(frozen=True)
class SenderTally:
    """The agents' side: samples produced, and what the collector acknowledged of them."""

    produced: int
    #: produced samples no 2xx ack acknowledged (the agent may still hold them)
    never_accepted: int
    #: samples acknowledged as new more than once: a batch counted twice
    accepted_twice: int


def sender_tally(produced: Iterable[SampleKey], exchanges: Iterable[Exchange]) -> SenderTally:
    made, exchanges = set(produced), list(exchanges)
    counts = accepted_samples(exchanges)
    return SenderTally(
        produced=len(made),
        never_accepted=len(made - acknowledged_samples(exchanges)),
        accepted_twice=sum(n - 1 for n in counts.values() if n > 1),
    )


def agents_tally(
    config: Path, db: Path, truth: GroundTruth, agents: Sequence[SimAgent]
) -> tuple[Tally, SenderTally]:
    """``settle`` the ledger, then its totals against ``truth`` over what ``agents``
    sampled, and the agents' own account of what was acknowledged."""
    settle(config, db)
    tally = ledger_tally(db, truth, spans_of(agents), STEP_SECONDS)
    sender = sender_tally(
        [k for a in agents for k in a.produced], [e for a in agents for e in a.wire.exchanges]
    )
    return tally, sender
