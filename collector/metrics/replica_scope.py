"""What a collector replica exports, so that Prometheus sums over replicas count once.

Every replica answers for the whole fleet (its /v1/fleet reads every owner's published
GPUs), but on /metrics each series has one source:
- per-GPU series (``gpufleet_gpu_state``, ``gpufleet_gpu_idle_seconds``): the owner of the
  GPU's shard, from the GPUs it applies itself;
- fleet-level series (GPUs by state, utilisation, power, recommendations, per-workload
  totals, rates, plans, savings): the leader only; a workload spans shards, so its totals
  come from the ledger, read by the leader, not from any one owner;
- each replica's own health (ingest counters, the write path, its leases: the
  ``gpufleet_replica_*`` families) from every replica; the samples it holds, its lag and
  its nodes' clock offsets are those of the shards it owns (ReplicaService.
  applying_fleets), so each node's ``gpufleet_node_clock_offset_seconds`` comes from one.
One collector (SQLite, or ``cluster.enabled`` false) has no scope and exports everything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from collector.cluster.keeper import LeaseState
from collector.metrics import catalogue as cat
from collector.metrics.families import Family, family, filled
from collector.metrics.fleet_families import fleet_families
from collector.records import GpuView


@dataclass(frozen=True)
class MetricScope:
    #: whether this replica leads now (fleet-level series here)
    leads: Callable[[], bool]
    #: the GPUs of the shards this replica owns, at ``now``
    owned: Callable[[float], list[GpuView]]


#: the two per-GPU families of fleet_families: from the GPU's owner
PER_GPU = (cat.GPU_STATE, cat.GPU_IDLE)


def scoped_fleet_families(
    scope: MetricScope, views: Callable[[float], list[GpuView]], now: float
) -> list[Family]:
    """The owned GPUs' per-GPU series; the fleet-level ones, over every replica's GPUs,
    only on the leader."""
    own = [f for f in fleet_families(scope.owned(now), now) if f.spec in PER_GPU]
    if not scope.leads():
        return own
    return [*(f for f in fleet_families(views(now), now) if f.spec not in PER_GPU), *own]


class LeaderOnly:
    """``inner``'s series while this replica leads, none otherwise (its ``refresh``
    kept, so the exposition caches it as it would ``inner``)."""

    def __init__(self, inner: Collector, leads: Callable[[], bool]) -> None:
        self.inner, self.leads = inner, leads
        refresh = getattr(inner, "refresh", None)
        if refresh is not None:
            self.refresh = refresh

    def describe(self) -> Iterable[Metric]:
        describe = getattr(self.inner, "describe", None)
        return list(describe()) if callable(describe) else []

    def collect(self) -> Iterable[Metric]:
        return list(self.inner.collect()) if self.leads() else []


class ReplicaExporter:
    """Each replica's own lease health, on every scrape (live, not cached)."""

    specs = cat.REPLICA

    def __init__(self, leases: Callable[[], LeaseState]) -> None:
        self.leases = leases

    def families(self) -> list[Family]:
        state = self.leases()
        age: dict[tuple[str, ...], float] = (
            {(): time.monotonic() - state.renewed_at} if state.renewed_at is not None else {}
        )
        return [
            Family(cat.REPLICA_SHARDS, {(): float(len(state.shards))}),
            Family(cat.REPLICA_LEADER, {(): float(state.leader)}),
            Family(cat.REPLICA_LEASE_AGE, age),
        ]

    def describe(self) -> Iterable[Metric]:
        return [family(spec) for spec in self.specs]

    def collect(self) -> Iterable[Metric]:
        return [filled(f.spec, f.values) for f in self.families()]
