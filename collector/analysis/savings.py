"""Savings proven, not promised: what a release actually freed, from what happened after it.

Definition. A release at time ``t`` of a workload that held GPUs ``G`` idle (an auto-release
``act``, or "Release now" answered from chat) frees, up to the end ``E`` of the window
asked, on each GPU ``g`` of ``G``:

    freed_seconds(g) = (E - t) - held_idle_seconds(g, t, E)

where ``held_idle_seconds`` is the time in ``[t, E)`` that ``g`` was held idle by anyone
(an allocated-idle episode of any workload, the released one included should it come back).
Time after the release that ``g`` was unallocated (it could leave the node pool), or held
and in use by another workload, or not reporting (removed from the pool) is freed. The money
not spent is the freed GPU-hours at the GPU-hour price the release recommendation carried
(``money_per_hour`` over its GPUs), the energy the freed hours at the idle power it carried
(``energy_kwh_per_month`` over its GPUs and the month's hours), the carbon likewise. Each
release counts from its own ``t``; several releases of the same GPU in one window count
each GPU-second once (the later release's window starts where it happened).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from collector.records import HOUR_SECONDS, MONTH_HOURS, IdleEpisode


@dataclass(frozen=True, slots=True)
class Release:
    workload_key: str
    at: float
    #: auto | chat
    by: str
    gpu_uuids: tuple[str, ...]
    #: the recommendation's rates for all its GPUs together
    money_per_hour: float
    energy_kwh_per_month: float
    carbon_kg_per_month: float
    currency: str


@dataclass(frozen=True, slots=True)
class Saved:
    release: Release
    freed_gpu_seconds: float
    money: float
    energy_kwh: float
    carbon_kg: float


def held_idle_seconds(episodes: Iterable[IdleEpisode], start: float, end: float) -> float:
    """Seconds in ``[start, end)`` covered by allocated-idle episodes (open ones run to
    ``end``); unallocated episodes (``workload_key`` None) do not count."""
    total = 0.0
    for e in episodes:
        if e.workload_key is None:
            continue
        stop = end if e.end is None else min(e.end, end)
        total += max(0.0, stop - max(e.start, start))
    return total


def saved(
    release: Release, episodes_by_gpu: Mapping[str, Sequence[IdleEpisode]], end: float
) -> Saved:
    """What ``release`` freed up to ``end`` (the definition above)."""
    span = max(0.0, end - release.at)
    freed = sum(
        span - held_idle_seconds(episodes_by_gpu.get(g, ()), release.at, end)
        for g in release.gpu_uuids
    )
    gpus = max(1, len(release.gpu_uuids))
    hours = freed / HOUR_SECONDS
    return Saved(
        release,
        freed,
        hours * release.money_per_hour / gpus,
        hours * release.energy_kwh_per_month / MONTH_HOURS / gpus,
        hours * release.carbon_kg_per_month / MONTH_HOURS / gpus,
    )


def savings(
    releases: Sequence[Release], episodes_by_gpu: Mapping[str, Sequence[IdleEpisode]], end: float
) -> list[Saved]:
    """Each release's savings to ``end``; a GPU released twice counts from the first
    release only up to the second."""
    ordered = sorted(releases, key=lambda r: r.at)
    out = []
    for i, r in enumerate(ordered):
        later = [n.at for n in ordered[i + 1 :] if set(n.gpu_uuids) & set(r.gpu_uuids)]
        out.append(saved(r, episodes_by_gpu, min([end, *later])))
    return out
