"""Consolidation: idle unallocated GPUs spread over busy nodes are bin-packing waste.

A node can be drained when every workload on it fits on free GPUs of the same model
elsewhere, each workload's GPUs on one target node (a multi-GPU job cannot be split across
nodes; workloads sharing a GPU move together). Freeing the node saves its whole price: the
moved work runs on GPUs the fleet already pays for. The plan is greedy and deterministic:
nodes with the least to move (then the most expensive) first, each workload first-fit
decreasing onto the target with the smallest hole that fits (big holes stay for big jobs).
A node that receives work is not drained in the same plan, and a drained node receives
nothing.

Only what the data supports is planned: a node with a GPU in an unknown state, busy
without a holder, or split into MIG instances is neither drained nor a target (moving MIG
work needs the same layout); a target GPU must be unallocated and idle past the window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from collector.recommend.rules import (
    RuleContext,
    by_node,
    make,
    physical,
    unallocated_idle,
)
from collector.records import GpuState, GpuView, Recommendation, RecommendationKind

#: free GPUs by (node, model), longest idle first
_Free = dict[tuple[str, str], list[GpuView]]


@dataclass(frozen=True)
class Unit:
    """What must move together: a workload's GPUs on one node (with any workload sharing
    one of them)."""

    workloads: tuple[str, ...]
    model: str
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class Move:
    unit: Unit
    to_node: str
    onto: tuple[GpuView, ...]


def consolidate(gpus: Sequence[GpuView], ctx: RuleContext) -> list[Recommendation]:
    """One per node the plan frees: which workloads move where, and the node's price."""
    nodes = by_node(gpus)
    plannable = {n: views for n, views in nodes.items() if _plannable(views)}
    candidates = [(n, units) for n, v in plannable.items() if (units := _units(v)) is not None]
    # room only where work runs: a node running nothing is a scale-down, not a target
    free = _free_gpus({n: plannable[n] for n, _ in candidates}, ctx)
    candidates.sort(key=lambda c: (_gpus_to_move(c[1]), -_price(nodes[c[0]], ctx), c[0]))
    receivers: set[str] = set()
    out = []
    for node, units in candidates:
        if node in receivers:
            continue
        moves = _place(node, units, free)
        if moves is None:
            continue
        for key in [k for k in free if k[0] == node]:
            del free[key]  # a drained node offers no room
        receivers.update(m.to_node for m in moves)
        out.append(_recommend(node, nodes[node], moves, ctx))
    return out


def _plannable(views: Sequence[GpuView]) -> bool:
    """Every GPU known, held or idle, and none split into MIG instances (a MIG parent's
    instances report from the same node, so one instance view rules the node out)."""
    for v in views:
        if v.mig_parent_uuid is not None or v.mig_profile is not None:
            return False
        if v.state is GpuState.UNKNOWN or (not v.workloads and v.idle_since is None):
            return False  # no data, or busy with nobody holding it: nothing to plan on
    return True


def _free_gpus(plannable: dict[str, list[GpuView]], ctx: RuleContext) -> _Free:
    free: _Free = {}
    for node, views in plannable.items():
        for v in views:
            if unallocated_idle(v, ctx) and v.healthy:
                free.setdefault((node, v.model), []).append(v)
    for views in free.values():
        views.sort(key=lambda v: (v.idle_since or ctx.now, v.uuid))
    return free


def _units(views: Sequence[GpuView]) -> list[Unit] | None:
    """The node's workloads grouped into what must move together; None when nothing runs
    there (a whole idle node is scale_down's) or a group spans GPU models."""
    parent: dict[str, str] = {}  # union-find over GPU uuids and workload keys

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    held = [v for v in views if v.workloads]
    for v in held:
        for ref in v.workloads:
            parent[root("w:" + ref.key)] = root("g:" + v.uuid)
    groups: dict[str, list[GpuView]] = {}
    for v in held:
        groups.setdefault(root("g:" + v.uuid), []).append(v)
    units = []
    for members in groups.values():
        models = {v.model for v in members}
        if len(models) != 1:
            return None
        keys = sorted({ref.key for v in members for ref in v.workloads})
        units.append(Unit(tuple(keys), models.pop(), tuple(sorted(v.uuid for v in members))))
    return sorted(units, key=lambda u: (-len(u.gpus), u.workloads)) or None


def _gpus_to_move(units: Sequence[Unit]) -> int:
    return sum(len(u.gpus) for u in units)


def _price(views: Sequence[GpuView], ctx: RuleContext) -> float:
    return sum(ctx.gpu_price(v) for v in physical(views))


def _place(node: str, units: Sequence[Unit], free: _Free) -> list[Move] | None:
    """Every unit onto free GPUs of its model on other nodes, or None (and ``free``
    untouched) when one does not fit."""
    room = Counter({k: len(v) for k, v in free.items() if k[0] != node})
    placed: list[tuple[Unit, tuple[str, str]]] = []
    for unit in units:  # largest first
        fits = [k for k, n in room.items() if k[1] == unit.model and n >= len(unit.gpus)]
        if not fits:
            return None
        target = min(fits, key=lambda k: (room[k], k[0]))
        room[target] -= len(unit.gpus)
        placed.append((unit, target))
    moves = []
    for unit, target in placed:
        onto, free[target] = free[target][: len(unit.gpus)], free[target][len(unit.gpus) :]
        moves.append(Move(unit, target[0], tuple(onto)))
    return moves


def _recommend(
    node: str, views: Sequence[GpuView], moves: Sequence[Move], ctx: RuleContext
) -> Recommendation:
    gpus = physical(views)
    money = _price(gpus, ctx)
    watts = sum(_idle_watts(v, ctx) for v in gpus)
    # the chance has existed as long as the room it uses has been free
    since = max(v.idle_since or ctx.now for m in moves for v in m.onto)
    savings = ctx.savings(money, watts, node, evidence_seconds=ctx.now - since)
    targets = sorted({m.to_node for m in moves})
    moved = sum(len(m.unit.workloads) for m in moves)
    models = ", ".join(sorted({v.model for v in gpus}))
    evidence: dict[str, object] = {
        "window_seconds": ctx.settings.idle_window_seconds,
        "idle_since": since,
        "idle_seconds": ctx.now - since,
        "moves": [
            {
                "workloads": list(m.unit.workloads),
                "gpus": len(m.unit.gpus),
                "model": m.unit.model,
                "from_gpus": list(m.unit.gpus),
                "to_node": m.to_node,
                "to_gpus": [v.uuid for v in m.onto],
            }
            for m in moves
        ],
        "target_nodes": targets,
        "freed_gpus": len(gpus),
        "power_watts": watts,
        "price_per_hour": money,
    }
    onto = ", ".join(targets) if len(targets) <= 3 else f"{len(targets)} nodes"
    title = (
        f"Consolidate: move {moved} workload(s) off {node} onto free {models} GPUs on "
        f"{onto}, then release {node} ({len(gpus)} GPUs): {money:.2f} {savings.currency}/h"
    )
    return make(
        RecommendationKind.CONSOLIDATE,
        node,
        ctx,
        title=title,
        evidence=evidence,
        savings=savings,
        gpu_uuids=tuple(v.uuid for v in gpus),
        node=node,
    )


def _idle_watts(view: GpuView, ctx: RuleContext) -> float:
    """What the freed GPU's seat costs in power: its model's idle floor (the moved work
    draws the same wherever it runs; the node's floor goes away with it)."""
    model = ctx.policy.catalogue.get(view.model)
    return model.idle_watts if model is not None else 0.0
