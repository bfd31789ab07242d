"""Read-side views over the ledger and the live fleet: workload reports, running totals,
and the rates in force now (idle cost per hour, PUE, grid intensity per region)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from collector.accounting.rates import Rates
from collector.backend import EnergyTotal, FleetRates, WasteTotal, WorkloadReport
from collector.ledger.store import GpuRecord, Ledger
from collector.records import GpuState, GpuView, IdleEpisode, Usage, WorkloadRef
from collector.usage_report import LedgerPeriod

IDLE_STATES = (GpuState.ALLOCATED_IDLE, GpuState.UNALLOCATED)


def workload_reports(
    ledger: Ledger,
    period: LedgerPeriod,
    open_episodes: Iterable[IdleEpisode],
    models: dict[str, str],
    currency: str,
) -> list[WorkloadReport]:
    """Every workload with usage in ``period``, with its idle episodes in it.

    ``period`` is the one ``usage_report.ledger_period`` widened to whole hours (the
    ledger's rollups are hourly): usage sums those hours, and the episodes counted and
    the longest idle stretch are clipped to the same period, so the figures agree.
    """
    start, end = period.start, period.end
    closed = ledger.idle_episodes(start, end)
    # an open episode that began after the range is not in it; one the ledger already
    # holds as closed (a tick committed it after the caller took the open ones) counts once
    done = {(e.gpu_uuid, e.start) for e in closed}
    episodes = [
        *closed,
        *(e for e in open_episodes if e.start < end and (e.gpu_uuid, e.start) not in done),
    ]
    count: dict[str, int] = {}
    longest: dict[str, float] = {}
    for episode in episodes:
        if episode.workload_key is None:
            continue
        seconds = min(episode.end if episode.end is not None else end, end) - max(
            episode.start, start
        )
        count[episode.workload_key] = count.get(episode.workload_key, 0) + 1
        longest[episode.workload_key] = max(longest.get(episode.workload_key, 0.0), seconds)
    reports = [
        WorkloadReport(
            key=ref.key,
            kind=ref.kind,
            name=ref.name,
            namespace=ref.namespace,
            team=ref.team,
            user=ref.user,
            currency=currency,
            usage=usage,
            gpu_models=(models[ref.key],) if ref.key in models else (),
            idle_episodes=count.get(ref.key, 0),
            longest_idle_seconds=longest.get(ref.key, 0.0),
            owner=ref.owner,
        )
        for ref, usage in ledger.usage_by_workload(start, end)
    ]
    return sorted(reports, key=lambda r: (-r.usage.idle_cost, r.key))


@dataclass(frozen=True, slots=True)
class LedgerTotals:
    """The ledger's all-time totals for one set of counters (a scrape): read from the
    ledger, or kept in memory by collector/running_totals.py."""

    by_workload: list[tuple[WorkloadRef, Usage]]
    by_gpu: list[tuple[GpuRecord, Usage]]
    #: workload key -> when it last held a GPU
    last_seen: dict[str, float]
    #: workload key -> the GPU model it was last seen on
    models: dict[str, str]
    #: what the rules read of ``by_gpu`` (None: summed at construction; ``with_models``
    #: keeps them, so a snapshot kept in memory is summed once, not per render)
    gpu_sums: GpuSums | None = None

    def __post_init__(self) -> None:
        if self.gpu_sums is None:
            object.__setattr__(self, "gpu_sums", sum_gpus(self.by_gpu))

    def sums(self) -> GpuSums:
        assert self.gpu_sums is not None  # set by __post_init__
        return self.gpu_sums

    @classmethod
    def read(cls, ledger: Ledger, models: dict[str, str]) -> LedgerTotals:
        """A fresh read of the ledger, with ``models`` as ``with_models`` takes them."""
        return cls.stored(ledger).with_models(models)

    @classmethod
    def stored(cls, ledger: Ledger) -> LedgerTotals:
        """What the ledger holds, its own models included (collector/running_totals.py
        seeds from this)."""
        return cls(
            ledger.usage_totals_by_workload(),
            ledger.usage_totals_by_gpu(),
            ledger.workload_last_seen(),
            ledger.workload_models(),
        )

    def with_models(self, models: dict[str, str]) -> LedgerTotals:
        """A workload's model is the one it was last seen on: ``models`` (this process's
        view), else the ledger's right-sizing statistics (``self.models``), so workloads
        that ended before a restart keep their model label."""
        if all(ref.key in models for ref, _ in self.by_workload):
            return dataclasses.replace(self, models=models)
        return dataclasses.replace(self, models={**self.models, **models})


@dataclass(frozen=True, slots=True)
class GpuSums:
    """The per-GPU totals summed as the waste and energy rules need them."""

    #: GPU model -> idle seconds nobody held and their share of the idle cost: each GPU's
    #: idle cost split in proportion to its unallocated idle seconds
    unallocated: dict[str, Usage]
    #: every GPU's usage added up
    fleet: Usage


def sum_gpus(by_gpu: Iterable[tuple[GpuRecord, Usage]]) -> GpuSums:
    """``GpuSums`` of the all-time per-GPU totals, added in ``by_gpu``'s order."""
    unallocated: dict[str, Usage] = {}
    fleet = Usage()
    for gpu, usage in by_gpu:
        fleet.add(usage)
        free = usage.idle_seconds - usage.allocated_idle_seconds
        if usage.idle_seconds <= 0 or free <= 0:
            continue
        part = unallocated.setdefault(gpu.model, Usage())
        part.idle_seconds += free
        part.idle_cost += usage.idle_cost * free / usage.idle_seconds
    return GpuSums(unallocated, fleet)


def waste_totals(ledger_totals: LedgerTotals) -> list[WasteTotal]:
    """Idle GPU-seconds and waste since the ledger began, per workload and for the
    unallocated GPUs of each model (workload "")."""
    models, seen = ledger_totals.models, ledger_totals.last_seen
    totals = [
        WasteTotal(
            namespace=ref.namespace,
            workload=ref.key,
            team=ref.team,
            model=models.get(ref.key, ""),
            idle_gpu_seconds=usage.idle_seconds,
            waste=usage.idle_cost,
            last_seen=seen.get(ref.key, math.inf),
        )
        for ref, usage in ledger_totals.by_workload
    ]
    totals += [
        WasteTotal("", "", "", model, u.idle_seconds, u.idle_cost)
        for model, u in sorted(ledger_totals.sums().unallocated.items())
    ]
    return totals


def energy_totals(ledger_totals: LedgerTotals) -> list[EnergyTotal]:
    """Energy (and its estimated part) and carbon since the ledger began per workload;
    unallocated energy as ""."""
    seen = ledger_totals.last_seen
    totals = [
        EnergyTotal(
            ref.namespace,
            ref.key,
            ref.team,
            u.energy_joules,
            u.carbon_grams,
            u.estimated_energy_joules,
            seen.get(ref.key, math.inf),
            ref.owner,
            ref.user,
            ref.queue,
            ref.priority_class,
        )
        for ref, u in ledger_totals.by_workload
    ]
    fleet = ledger_totals.sums().fleet
    allocated = Usage()
    for total in totals:
        allocated.energy_joules += total.energy_joules
        allocated.carbon_grams += total.carbon_grams
        allocated.estimated_energy_joules += total.estimated_energy_joules
    totals.append(
        EnergyTotal(
            "",
            "",
            "",
            max(0.0, fleet.energy_joules - allocated.energy_joules),
            max(0.0, fleet.carbon_grams - allocated.carbon_grams),
            max(0.0, fleet.estimated_energy_joules - allocated.estimated_energy_joules),
        )
    )
    return totals


def fleet_rates(
    views: Iterable[GpuView],
    rates: Rates,
    node_labels: Mapping[str, Mapping[str, str]],
    now: float,
) -> FleetRates:
    """Waste now (the summed hourly price of the GPUs idle now), the PUE, and the grid
    intensity at ``now`` of each region the known nodes are in."""
    idle_cost = 0.0
    nodes: set[str] = set()
    for view in views:
        nodes.add(view.node)
        if view.state in IDLE_STATES:
            idle_cost += rates.view_price_per_hour(view)
    intensity = rates.region_intensities(nodes, node_labels, now)
    return FleetRates(rates.currency, idle_cost, rates.pue, intensity)


class LiveRates:
    """A RatesSource over the live fleet (``fleet(now)``, e.g. ``LiveFleet.views``) and the
    rates in force. ``node_labels`` gives each node's labels (its ``region``); without it
    nodes are placed by ``carbon.node_regions``."""

    def __init__(
        self,
        fleet: Callable[[float], list[GpuView]],
        rates: Rates,
        node_labels: Callable[[], Mapping[str, Mapping[str, str]]] = dict,
    ) -> None:
        self._fleet = fleet
        self._rates = rates
        self._node_labels = node_labels

    def fleet_rates(self, now: float) -> FleetRates:
        return fleet_rates(self._fleet(now), self._rates, self._node_labels(), now)
