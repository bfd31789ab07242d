"""MIG: who gets a MIG-enabled GPU's energy, from its instances' holders and activity."""

from __future__ import annotations

from collections.abc import Iterable

from collector.analysis.energy import split_mig_energy
from collector.fleet.state import TrackedGpu
from collector.records import WorkloadRef


def mig_shares(parent: TrackedGpu, gpus: Iterable[TrackedGpu]) -> dict[WorkloadRef, float]:
    """Who gets a MIG-enabled GPU's energy: its instances' holders, each instance weighted
    by its SM activity (equally when none is known; DESIGN 4), as of the instances' latest
    applied readings. An instance nobody holds keeps its part unallocated, so the shares
    may sum to less than 1; empty when no instance has been seen."""
    instances = [g for g in gpus if g.info.mig_parent_uuid == parent.info.uuid and g.last]
    parts = split_mig_energy(
        1.0, [g.last.to_sample(g.info.uuid) for g in instances if g.last is not None]
    )
    shares: dict[WorkloadRef, float] = {}
    for instance in instances:
        assert instance.last is not None
        part = parts.get(instance.info.uuid, 0.0)
        for ref, share in instance.last.holders.shares.items():
            shares[ref] = shares.get(ref, 0.0) + part * share
    return shares
