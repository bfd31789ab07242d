"""What the console's read routes answer (collector/web/fleet_api.py): the fleet by node,
without a per-GPU list (``GET /v1/fleet/summary``, what the fleet page draws first), and
GPUs with their price and usage (``GET /v1/gpus/usage``). Pure: plain data in, figures
out; the OpenAPI document is generated from these types."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from collector.backend import FleetSummary, summarise_fleet
from collector.records import HOUR_SECONDS, DuplicateGpu, GpuState, GpuView, Usage

#: states in which a GPU wastes its price: held idle, or held by nobody
WASTING = frozenset({GpuState.ALLOCATED_IDLE, GpuState.UNALLOCATED})

_STATES = tuple(state.value for state in GpuState)
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
    by_state: dict[str, int] = dict.fromkeys(_STATES, 0)
    waste = 0.0
    for gpu in gpus:
        by_state[gpu.state] += 1  # a StrEnum: its own value as a key
        if gpu.state in WASTING:
            waste += price_of(gpu)
    models = tuple(sorted({g.model for g in gpus}))
    healthy = all(g.healthy for g in gpus)
    return NodeSummary(node, models, len(gpus), by_state, waste, healthy)


def natural_key(name: str) -> tuple[str | int, ...]:
    """``gpu-node-10`` -> ("gpu-node-", 10, ""): digits compare as numbers."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


class GpuUsage(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    node: str
    index: int
    model: str
    #: on-demand price of one GPU-hour in ``currency``; what an idle hour of it wastes
    price_per_hour: float
    usage: Usage


class GpuUsageResponse(msgspec.Struct, frozen=True, kw_only=True):
    start: float
    end: float
    currency: str
    gpus: list[GpuUsage]


class GpuUsagePageResponse(msgspec.Struct, frozen=True, kw_only=True):
    """``/v1/gpus/usage`` with a filter, ``limit`` or ``cursor``."""

    start: float
    end: float
    currency: str
    gpus: list[GpuUsage]
    #: GPUs matching the filter, on every page
    total: int
    #: pass as ``cursor`` for the next page; None on the last
    next_cursor: str | None
    #: summed over every matching GPU, on every page (``limit=1`` asks for the sum alone)
    usage: Usage


# ``GET /v1/fleet/trend`` (collector/web/trend_api.py)
class TrendHour(msgspec.Struct, frozen=True, kw_only=True):
    hour_start: float
    #: active / (active + idle) GPU-seconds of the hour; None when none is known
    utilisation_ratio: float | None
    active_gpu_hours: float
    idle_gpu_hours: float
    #: what the idle GPU-hours cost, in ``currency``
    idle_cost: float
    cost: float
    energy_joules: float


class TrendResponse(msgspec.Struct, frozen=True, kw_only=True):
    start: float
    end: float
    currency: str
    hours: list[TrendHour]


def trend_hour(hour_start: float, usage: Usage) -> TrendHour:
    known = usage.active_seconds + usage.idle_seconds
    return TrendHour(
        hour_start=hour_start,
        utilisation_ratio=usage.active_seconds / known if known > 0 else None,
        active_gpu_hours=usage.active_seconds / HOUR_SECONDS,
        idle_gpu_hours=usage.idle_seconds / HOUR_SECONDS,
        idle_cost=usage.idle_cost,
        cost=usage.cost,
        energy_joules=usage.energy_joules,
    )
