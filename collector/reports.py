"""Read-side views over the ledger and the live fleet: workload reports and running totals."""

from __future__ import annotations

import math
from collections.abc import Iterable

from collector.api import EnergyTotal, WasteTotal, WorkloadReport
from collector.ledger import Ledger
from collector.records import HOUR_SECONDS, IdleEpisode, Usage


def workload_reports(
    ledger: Ledger,
    start: float,
    end: float,
    open_episodes: Iterable[IdleEpisode],
    models: dict[str, str],
    currency: str,
) -> list[WorkloadReport]:
    """Every workload with usage in [start, end), with its idle episodes in the range.

    Usage sums the hourly rollups that overlap the range: the ledger counts an hour when
    it *starts* in its range, so the range passed down starts at the hour ``start`` is in.
    """
    closed = ledger.idle_episodes(start, end)
    # an open episode that began after the range is not in it; one the ledger already
    # holds as closed (a tick committed it after the caller took the open ones) counts once
    done = {(e.gpu_uuid, e.start) for e in closed}
    episodes = [*closed, *(e for e in open_episodes
                           if e.start < end and (e.gpu_uuid, e.start) not in done)]  # fmt: skip
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
        )
        for ref, usage in ledger.usage_by_workload(_hour_of(start), end)
    ]
    return sorted(reports, key=lambda r: (-r.usage.idle_cost, r.key))


def _hour_of(ts: float) -> float:
    return math.floor(ts / HOUR_SECONDS) * HOUR_SECONDS


def waste_totals(ledger: Ledger, models: dict[str, str]) -> list[WasteTotal]:
    """Idle GPU-seconds and waste since the ledger began, per workload and for the
    unallocated GPUs of each model (workload "")."""
    totals = [
        WasteTotal(
            namespace=ref.namespace,
            workload=ref.key,
            team=ref.team,
            model=models.get(ref.key, ""),
            idle_gpu_seconds=usage.idle_seconds,
            waste=usage.idle_cost,
        )
        for ref, usage in ledger.usage_totals_by_workload()
    ]
    unallocated: dict[str, Usage] = {}
    for gpu, usage in ledger.usage_totals_by_gpu():
        free = usage.idle_seconds - usage.allocated_idle_seconds
        if usage.idle_seconds <= 0 or free <= 0:
            continue
        part = unallocated.setdefault(gpu.model, Usage())
        part.idle_seconds += free
        part.idle_cost += usage.idle_cost * free / usage.idle_seconds
    totals += [
        WasteTotal("", "", "", model, u.idle_seconds, u.idle_cost)
        for model, u in sorted(unallocated.items())
    ]
    return totals


def energy_totals(ledger: Ledger) -> list[EnergyTotal]:
    """Energy and carbon since the ledger began per workload; unallocated energy as ""."""
    totals = [
        EnergyTotal(ref.namespace, ref.key, ref.team, u.energy_joules, u.carbon_grams)
        for ref, u in ledger.usage_totals_by_workload()
    ]
    fleet = Usage()
    for _, usage in ledger.usage_totals_by_gpu():
        fleet.add(usage)
    allocated_j = sum(t.energy_joules for t in totals)
    allocated_g = sum(t.carbon_grams for t in totals)
    totals.append(
        EnergyTotal(
            "", "", "", max(0.0, fleet.energy_joules - allocated_j),
            max(0.0, fleet.carbon_grams - allocated_g),
        )
    )  # fmt: skip
    return totals
