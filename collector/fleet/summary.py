"""The fleet by node, without a per-GPU list: what ``GET /v1/fleet/summary`` answers and
the console's fleet page draws first. Pure: views and a price function in, figures out."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collector.backend import FleetSummary, summarise_fleet
from collector.records import DuplicateGpu, GpuState, GpuView

#: states in which a GPU wastes its price: held idle, or held by nobody
WASTING = frozenset({GpuState.ALLOCATED_IDLE, GpuState.UNALLOCATED})

#: price of one GPU-hour of ``view`` (its share of its model's price), in ``currency``
PriceOf = Callable[[GpuView], float]


@dataclass(frozen=True, slots=True)
class NodeSummary:
    node: str
    #: the GPU models on the node, sorted
    models: tuple[str, ...]
    #: GPUs and MIG instances on the node
    gpus: int
    #: every state, zeros included
    gpus_by_state: dict[str, int]
    #: summed hourly price of the node's GPUs that waste now (allocated-idle, unallocated)
    waste_per_hour: float
    #: False when any of its GPUs reports itself unhealthy (XID errors, lost)
    healthy: bool


@dataclass(frozen=True, slots=True)
class FleetSummaryResponse:
    """``GET /v1/fleet/summary``: nodes by ``waste_per_hour``, highest first, then by name
    in natural order (gpu-node-2 before gpu-node-10)."""

    now: float
    summary: FleetSummary
    currency: str
    #: summed over the nodes
    waste_per_hour: float
    nodes: Sequence[NodeSummary]
    duplicate_gpus: Sequence[DuplicateGpu] = ()


def summarise_by_node(
    now: float,
    views: Sequence[GpuView],
    duplicates: Sequence[DuplicateGpu],
    price_of: PriceOf,
    currency: str,
) -> FleetSummaryResponse:
    by_node: dict[str, list[GpuView]] = {}
    for view in views:
        by_node.setdefault(view.node, []).append(view)
    nodes = [_node(node, gpus, price_of) for node, gpus in by_node.items()]
    nodes.sort(key=lambda n: (-n.waste_per_hour, natural_key(n.node)))
    waste = sum(n.waste_per_hour for n in nodes)
    return FleetSummaryResponse(now, summarise_fleet(views), currency, waste, nodes, duplicates)


def _node(node: str, gpus: Sequence[GpuView], price_of: PriceOf) -> NodeSummary:
    by_state = {state.value: 0 for state in GpuState}
    waste = 0.0
    for gpu in gpus:
        by_state[gpu.state.value] += 1
        if gpu.state in WASTING:
            waste += price_of(gpu)
    models = tuple(sorted({g.model for g in gpus}))
    healthy = all(g.healthy for g in gpus)
    return NodeSummary(node, models, len(gpus), by_state, waste, healthy)


def natural_key(name: str) -> tuple[str | int, ...]:
    """``gpu-node-10`` -> ("gpu-node-", 10, ""): digits compare as numbers."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))
