"""Simulated nodes fed to a real collector core the way agents POST them, for the
recommender's tests: batches through ``CollectorService.submit``, the applier's ticks,
then the real ``Recommender``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from agent.model import SCHEMA_VERSION, Batch
from agent.sources.simulated.hardware import gpu_model
from agent.sources.simulated.plan import build_gpus, make_workload
from agent.sources.simulated.source import ActivityKind, SimJob, SimulatedNode
from agent.sources.simulated.workloads import make_pattern, stable_key
from collector.accounting.rates import Rates
from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.config import CarbonSettings, CollectorSettings
from collector.ledger.store import Ledger
from collector.records import Recommendation, RecommendationKind
from collector.service import CollectorCore


class Rig:
    """A real core over a SQLite ledger, with a clock the feed moves."""

    def __init__(
        self, tmp_path: Path, start: float, settings: CollectorSettings, prices: PriceBook
    ) -> None:
        self.now = start
        rates = Rates(prices, IntensityTable.default(), CarbonSettings())
        ledger = Ledger.open(str(tmp_path / "ledger.db"))
        self.core = CollectorCore.build(settings, ledger, rates, lambda: self.now)
        self.seq: dict[str, int] = {}

    def feed(
        self, nodes: Sequence[SimulatedNode], until: float, step: float, per_batch: int = 10
    ) -> None:
        """Every node sampled every ``step`` s from the clock to ``until``, shipped every
        ``per_batch`` samples, applied after each round of batches."""
        pending: dict[str, list[object]] = {n.name: [] for n in nodes}
        t = self.now
        while t <= until:
            self.now = t
            for node in nodes:
                pending[node.name] += node.read(t)
            if len(pending[nodes[0].name]) >= per_batch * len(nodes[0].gpus) or t + step > until:
                for node in nodes:
                    self._ship(node, pending[node.name], t)
                    pending[node.name] = []
                self.core.applier.tick()
            t += step
        self.core.applier.tick(flush=True)

    def _ship(self, node: SimulatedNode, samples: list[object], sent_at: float) -> None:
        seq = self.seq[node.name] = self.seq.get(node.name, 0) + 1
        batch = Batch(
            schema_version=SCHEMA_VERSION,
            node=node.name,
            agent_boot_id="boot-1",
            seq=seq,
            sent_at=sent_at,
            gpus=tuple(node.discover()),
            samples=tuple(samples),  # type: ignore[arg-type]
        )
        body = msgspec.json.encode(batch)
        ack = self.core.service.submit(body, None, sent_at).result(10)
        assert ack.status == "accepted", ack

    def recommendations(self, kind: RecommendationKind | None = None) -> list[Recommendation]:
        self.core.recommender.evaluate(self.now)
        recs = self.core.ledger.recommendations(None)
        return sorted((r for r in recs if kind is None or r.kind is kind), key=lambda r: r.id)

    def close(self) -> None:
        self.core.close()
        self.core.ledger.close()


def node_with_jobs(
    name: str, model: str, jobs: Sequence[tuple[int, ...]], gpus: int, start: float,
    kind: ActivityKind = ActivityKind.TRAINING,
) -> SimulatedNode:  # fmt: skip
    """A node of ``gpus`` GPUs of ``model`` where each entry of ``jobs`` is one job holding
    those GPU indexes since before ``start``; the other GPUs are free."""
    placed = [
        SimJob(
            workload=make_workload(kind, False, 0, name, slot),
            pattern=make_pattern(kind, stable_key(0, name, slot, "pattern")),
            node=name,
            gpu_indexes=indexes,
        )
        for slot, indexes in enumerate(jobs)
    ]
    return SimulatedNode(name, build_gpus(name, [gpu_model(model)] * gpus, placed, 0, start))
