"""The savings report (``GET /v1/savings``, ``gpufleet report --savings``, /metrics, the
console, the weekly report): every release in a period and what it freed up to the
period's end, by collector/analysis/savings.py's definition, read from the ledger.

Releases are the auto-release engine's ``act`` steps that succeeded (table action_log)
and "Release now" answers that released (table answers); the GPUs and rates are those of
the release recommendation (``release_idle:<workload>``) as stored.
Each "Keep" answered in the period is followed as well: the GPU-hours its GPUs were held
idle while it ran, and their cost (``kept``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from collector.analysis.savings import Release, Saved, held_idle_seconds, savings
from collector.ledger.store import Ledger
from collector.records import HOUR_SECONDS, IdleEpisode

PERIOD_WORDS = {7 * 86400.0: "this week", 86400.0: "in the day"}


class SavedOut(msgspec.Struct, frozen=True):
    workload_key: str
    released_at: float
    by: str
    gpus: int
    freed_gpu_hours: float
    money: float
    energy_kwh: float
    carbon_kg: float


class KeptOut(msgspec.Struct, frozen=True):
    workload_key: str
    kept_at: float
    kept_until: float
    who: str
    gpus: int
    #: held idle while kept: what the keep cost
    idle_gpu_hours_while_kept: float
    money_while_kept: float


class SavingsReport(msgspec.Struct, frozen=True):
    start: float
    end: float
    currency: str
    released_gpu_hours: float
    money: float
    energy_kwh: float
    carbon_kg: float
    releases: list[SavedOut]
    summary: str
    rule: str = (
        "per release at t of GPUs G: GPU-hours from t to the period's end that G were not "
        "held idle by anyone, priced at the release recommendation's rates"
    )
    #: the "Keep" answers of the period and what they came to
    kept: list[KeptOut] = msgspec.field(default_factory=list)


def releases(ledger: Ledger, start: float, end: float) -> list[Release]:
    """The successful releases in ``[start, end)``, with their recommendations' GPUs."""
    rows = ledger.read(
        lambda c: c.execute(
            "SELECT workload_key, at, 'auto' FROM action_log WHERE stage = 'act' "
            "AND decision = 'acted' AND at >= ? AND at < ? "
            "UNION ALL SELECT workload_key, answered_at, 'chat' FROM answers "
            "WHERE outcome = 'released' AND answered_at >= ? AND answered_at < ? ORDER BY 2",
            (start, end, start, end),
        ).fetchall()
    )
    return _with_rates(ledger, rows)


def keeps(ledger: Ledger, start: float, end: float) -> list[tuple[Release, float]]:
    """The "Keep" answers in ``[start, end)`` (``by``: who kept), with when each ends."""
    rows = ledger.read(
        lambda c: c.execute(
            "SELECT workload_key, answered_at, who, kept_until FROM answers "
            "WHERE outcome = 'kept' AND answered_at >= ? AND answered_at < ? ORDER BY 2",
            (start, end),
        ).fetchall()
    )
    until = {(key, float(at)): float(u) for key, at, _, u in rows}
    found = _with_rates(ledger, [(key, at, who) for key, at, who, _ in rows])
    return [(r, until[(r.workload_key, r.at)]) for r in found]


def _with_rates(ledger: Ledger, rows: Sequence[tuple[str, float, str]]) -> list[Release]:
    out = []
    for key, at, by in rows:
        rec = ledger.get_recommendation(f"release_idle:{key}")
        if rec is None or not rec.gpu_uuids:
            continue
        s = rec.savings
        out.append(
            Release(
                key,
                float(at),
                by,
                rec.gpu_uuids,
                s.money_per_hour,
                s.energy_kwh_per_month,
                s.carbon_kg_per_month,
                s.currency,
            )
        )
    return out


def savings_report(
    ledger: Ledger,
    start: float,
    end: float,
    currency: str,
    workloads: Callable[[str], bool] | None = None,
) -> SavingsReport:
    """The releases in ``[start, end)`` (of the ``workloads`` it accepts, else all)."""

    def wanted(r: Release) -> bool:
        return workloads is None or workloads(r.workload_key)

    found = [r for r in releases(ledger, start, end) if wanted(r)]
    kept = [(r, until) for r, until in keeps(ledger, start, end) if wanted(r)]
    episodes = _episodes(ledger, [*found, *(r for r, _ in kept)], end)
    report = report_of(savings(found, episodes, end), start, end, currency)
    return msgspec.structs.replace(report, kept=[kept_out(r, u, episodes, end) for r, u in kept])


def _episodes(
    ledger: Ledger, subjects: Sequence[Release], end: float
) -> dict[str, list[IdleEpisode]]:
    episodes: dict[str, list[IdleEpisode]] = {g: [] for r in subjects for g in r.gpu_uuids}
    if subjects:
        first = min(r.at for r in subjects)
        for e in ledger.idle_episodes(first, end, include_open=True):
            if e.gpu_uuid in episodes:
                episodes[e.gpu_uuid].append(e)
    return episodes


def kept_out(
    r: Release, until: float, episodes: dict[str, list[IdleEpisode]], end: float
) -> KeptOut:
    """What a keep came to: the GPU-hours its GPUs were held idle while it ran (to its end
    or the period's), and what they cost; 0 when the workload went back to work."""
    stop = min(until, end)
    idle = sum(held_idle_seconds(episodes.get(g, ()), r.at, stop) for g in r.gpu_uuids)
    hours = idle / HOUR_SECONDS
    money = hours * r.money_per_hour / max(1, len(r.gpu_uuids))
    return KeptOut(
        r.workload_key, r.at, until, r.by, len(r.gpu_uuids), round(hours, 3), round(money, 2)
    )


def report_of(items: Sequence[Saved], start: float, end: float, currency: str) -> SavingsReport:
    out = [
        SavedOut(
            s.release.workload_key,
            s.release.at,
            s.release.by,
            len(s.release.gpu_uuids),
            round(s.freed_gpu_seconds / HOUR_SECONDS, 3),
            round(s.money, 2),
            round(s.energy_kwh, 3),
            round(s.carbon_kg, 3),
        )
        for s in items
    ]
    hours = sum(s.freed_gpu_seconds for s in items) / HOUR_SECONDS
    money = sum(s.money for s in items)
    kwh = sum(s.energy_kwh for s in items)
    kg = sum(s.carbon_kg for s in items)
    when = PERIOD_WORDS.get(end - start, f"in {(end - start) / HOUR_SECONDS:g} h")
    summary = (
        f"gpufleet released {hours:.0f} idle GPU-hours {when}: "
        f"{money:,.0f} {currency}, {kwh:,.0f} kWh"
    )
    return SavingsReport(
        start,
        end,
        currency,
        round(hours, 3),
        round(money, 2),
        round(kwh, 3),
        round(kg, 3),
        out,
        summary,
    )
