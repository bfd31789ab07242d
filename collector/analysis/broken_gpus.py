"""Money spent on broken GPUs, and GPUs missing from their node (issue 24 item 4).

Pure functions. ``held_broken`` prices each GPU a workload held over its window
(collector/analysis/work_window.py) while it was broken: off the bus (NVML GPU_IS_LOST)
for its lost share of the window; logging hardware XIDs, gaining uncorrected ECC errors or
with row remaps pending for the whole window (once a board faults, none of its work can be
trusted); power/thermal throttled for the share of its busy samples that were. The
conditions are the verdicts' (collector/analysis/verdicts.py: ``HARDWARE_XIDS``,
``THROTTLE_MASK``, ``BottleneckPolicy``), so a GPU_FAULT verdict and its GPU agree.

``count_gpus`` compares each node's working GPUs with what it should have: the most it
ever reported while the collector remembers its GPUs, or a configured count. A node that
says nothing fresh is unknown, never short.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from collector.analysis.verdicts import BottleneckPolicy
from collector.analysis.work_window import GpuWindow, WorkloadWindow
from collector.records import GpuView


class Condition(enum.StrEnum):
    OFF_BUS = "off_bus"
    XID = "xid"
    ECC = "ecc"
    THROTTLED = "throttled"


@dataclass(frozen=True, slots=True)
class HeldBroken:
    """One GPU a workload held while broken; money in the price book's currency."""

    uuid: str
    node: str
    workload_key: str
    condition: Condition
    #: the share of the window it was broken (0..1)
    share: float
    money_per_hour: float
    #: the hardware XID codes it logged over the window
    xids: tuple[int, ...] = ()


def condition_of(gpu: GpuWindow, policy: BottleneckPolicy) -> tuple[Condition, float] | None:
    """The worst condition of ``gpu`` over its window and the share of it, or None."""
    if gpu.lost_share >= policy.lost_share:
        return Condition.OFF_BUS, gpu.lost_share
    if gpu.fault_xid_samples:
        return Condition.XID, 1.0
    if gpu.ecc_uncorrected_increase or gpu.remap_pending_samples:
        return Condition.ECC, 1.0
    slow = gpu.clock_ratio is not None and gpu.clock_ratio < policy.clock_low
    if slow and gpu.throttled_share >= policy.throttled_share:
        return Condition.THROTTLED, gpu.throttled_share
    return None


def held_broken(
    windows: Iterable[WorkloadWindow], prices: Mapping[str, float], policy: BottleneckPolicy
) -> list[HeldBroken]:
    """Every broken GPU of every window; ``prices``: hourly price by uuid (absent: 0)."""
    out = []
    for window in windows:
        if window.seconds < policy.min_window_seconds:
            continue  # too short to say, as for the verdicts
        for gpu in window.gpus:
            found = condition_of(gpu, policy)
            if found is None:
                continue
            condition, share = found
            money = prices.get(gpu.uuid, 0.0) * share
            key = window.workload.key
            out.append(HeldBroken(gpu.uuid, gpu.node, key, condition, share, money, gpu.fault_xids))
    return out


def money_by(broken: Iterable[HeldBroken], key: Callable[[HeldBroken], str]) -> dict[str, float]:
    """Hourly money on broken GPUs summed by ``key`` (node, workload key, condition)."""
    out: dict[str, float] = {}
    for b in broken:
        out[key(b)] = out.get(key(b), 0.0) + b.money_per_hour
    return out


@dataclass(frozen=True, slots=True)
class NodeGpuCount:
    """A node's physical GPUs against what it should have."""

    node: str
    expected: int
    #: reporting fresh, healthy samples
    working: tuple[GpuView, ...]
    #: reported before, silent now while the node still reports (NVML no longer lists it)
    missing: tuple[GpuView, ...]
    #: reported, but lost (healthy=False: fallen off the bus)
    lost: tuple[GpuView, ...]

    @property
    def short(self) -> int:
        return max(0, self.expected - len(self.working))


def count_gpus(
    views: Sequence[GpuView],
    now: float,
    stale_after_seconds: float,
    expected_of: Callable[[str], int | None],
) -> list[NodeGpuCount]:
    """Each node with fresh data that has fewer working GPUs than expected, by name.

    A GPU is fresh when heard of within ``stale_after_seconds`` of ``now`` (collector
    clock); ``expected_of(node)``: a configured count, or None (then: the most it reported)."""
    by_node: dict[str, list[GpuView]] = {}
    for view in views:
        if view.mig_parent_uuid is None:  # physical GPUs; a MIG slice is part of one
            by_node.setdefault(view.node, []).append(view)
    out = []
    for node in sorted(by_node):
        gpus = by_node[node]
        fresh = [g for g in gpus if _fresh(g, now, stale_after_seconds)]
        if not fresh:
            continue  # silent: unknown, not short
        count = NodeGpuCount(
            node=node,
            expected=max(len(gpus), expected_of(node) or 0),
            working=tuple(g for g in fresh if g.healthy),
            missing=tuple(g for g in gpus if not _fresh(g, now, stale_after_seconds)),
            lost=tuple(g for g in fresh if not g.healthy),
        )
        if count.short:
            out.append(count)
    return out


def _fresh(view: GpuView, now: float, stale_after_seconds: float) -> bool:
    return view.last_seen is not None and now - view.last_seen <= stale_after_seconds
