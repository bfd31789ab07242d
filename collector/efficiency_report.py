"""The efficiency report for one user or one team over a day or a week (issue 20 item 4):
GPU-hours held, active and idle, money wasted, energy and carbon, the worst jobs, the
trend against the period before, and the recommendations still open.

The figures are ``gpufleet report --by user|team``'s for the same period: the subject's
row of ``usage_report.group_report`` (one path for the rule), its jobs the same hourly
workload rollups. "Used" is the mean SM activity over the held time (the rollups' SM
activity x seconds over their active and idle seconds, schema V10); GPU-hours active (at or
above the idle threshold) are given beside it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from collector.ledger.store import Ledger
from collector.records import HOUR_SECONDS, LIVE_STATUSES, Usage
from collector.savings_report import SavingsReport, savings_report
from collector.usage_report import LedgerPeriod, group_report, ledger_period

Subject = Literal["user", "team"]
WORST_JOBS = 5
PERIOD_SECONDS = {"daily": 86400.0, "weekly": 7 * 86400.0}


class Figures(msgspec.Struct, frozen=True):
    held_gpu_hours: float
    active_gpu_hours: float
    idle_gpu_hours: float
    idle_fraction: float
    wasted: float
    cost: float
    energy_kwh: float
    carbon_kg: float
    #: 0..1, the mean SM activity over the held GPU-hours ("used"); 0 for periods whose
    #: rollups predate schema V10
    sm_activity_mean: float = 0.0


class Job(msgspec.Struct, frozen=True):
    workload_key: str
    figures: Figures


class OpenRecommendation(msgspec.Struct, frozen=True):
    id: str
    title: str
    money_per_month: float


class EfficiencyReport(msgspec.Struct, frozen=True):
    subject: Subject
    name: str
    currency: str
    start: float
    end: float
    figures: Figures
    previous: Figures
    worst_jobs: list[Job]
    open_recommendations: list[OpenRecommendation]
    #: what the releases of the subject's workloads in the period freed (savings_report.py)
    savings: SavingsReport


def figures_of(u: Usage) -> Figures:
    """The same rounding as ``gpufleet report``'s rows (gpufleet/cli/report.py row_of)."""
    held = u.active_seconds + u.idle_seconds
    return Figures(
        held_gpu_hours=round(held / HOUR_SECONDS, 3),
        active_gpu_hours=round(u.active_seconds / HOUR_SECONDS, 3),
        idle_gpu_hours=round(u.idle_seconds / HOUR_SECONDS, 3),
        idle_fraction=round(u.idle_seconds / held, 4) if held else 0.0,
        wasted=round(u.idle_cost, 2),
        cost=round(u.cost, 2),
        energy_kwh=round(u.energy_joules / 3.6e6, 3),
        carbon_kg=round(u.carbon_grams / 1000, 3),
        sm_activity_mean=round(u.sm_activity_seconds / held, 4) if held else 0.0,
    )


def subject_usage(ledger: Ledger, subject: Subject, name: str, period: LedgerPeriod) -> Usage:
    rows = dict(group_report(ledger, subject, period).rows)
    return rows.get(name, Usage())


def efficiency_report(
    ledger: Ledger, subject: Subject, name: str, end: float, every: str, now: float, currency: str
) -> EfficiencyReport:
    """The report for the ``every`` (daily | weekly) period ending at ``end``."""
    seconds = PERIOD_SECONDS[every]
    period = ledger_period(end - seconds, end, now)
    before = ledger_period(end - 2 * seconds, end - seconds, now)
    mine = {
        ref.key: usage
        for ref, usage in ledger.usage_by_workload(period.start, period.end)
        if (ref.user if subject == "user" else ref.team) == name
    }
    worst = sorted(mine.items(), key=lambda kv: (-kv[1].idle_cost, kv[0]))[:WORST_JOBS]
    recs = [
        OpenRecommendation(r.id, r.title, round(r.savings.money_per_month, 2))
        for r in ledger.recommendations(LIVE_STATUSES)
        if r.workload_key in mine
    ]
    return EfficiencyReport(
        subject,
        name,
        currency,
        period.start,
        period.end,
        figures_of(subject_usage(ledger, subject, name, period)),
        figures_of(subject_usage(ledger, subject, name, before)),
        [Job(key, figures_of(u)) for key, u in worst if u.idle_seconds > 0],
        recs,
        savings_report(ledger, period.start, period.end, currency, mine.__contains__),
    )
