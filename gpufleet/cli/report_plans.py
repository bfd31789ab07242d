"""``gpufleet report --plans``: what the fleet's GPUs cost over the period under today's mix
of plans, the cheapest mix, all on demand and all reserved, and the same with idle
GPU-hours removed; then the utilisation gap to the target. Table, CSV or JSON; the JSON
is ``GET /v1/plans``'s body for the same period."""

from __future__ import annotations

import csv
import sys
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from collector.analysis.price_plans import ON_DEMAND, PLAN_TITLES
from collector.plans_report import CostsOut, MixOut, PlanRow, PlansReport

CSV_COLUMNS = ("subject", "gpu_count", "hours", "today", "recommended", "cost_today",
               "cost_recommended", "cost_all_on_demand", "cost_all_reserved",
               "cost_recommended_idle_removed", "saving", "saving_idle_removed",
               "saving_if_usage_drops", "period_start", "period_end")  # fmt: skip
TOTAL = "total"


def emit_plans(report: PlansReport, fmt: str, iso: Any) -> None:
    """Write ``report`` to stdout as ``fmt`` (table, csv or json); ``iso`` formats times."""
    if fmt == "json":
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
        sys.stdout.write("\n")
    elif fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        span = {"period_start": iso(report.start), "period_end": iso(report.end)}
        for row in report.rows:
            writer.writerow({**csv_row(row), **span})
        writer.writerow({**_total_row(report), **span})
    else:
        console = Console()
        (console if console.is_terminal else Console(width=200)).print(table(report, iso))


def mix_words(mix: MixOut, gpu_count: int) -> str:
    if mix.plan == ON_DEMAND or mix.reserved_gpus == 0:
        return f"all {gpu_count} on demand"
    return (
        f"{mix.reserved_gpus} on {PLAN_TITLES[mix.plan]}, {gpu_count - mix.reserved_gpus} on demand"
    )


def csv_row(row: PlanRow) -> dict[str, Any]:
    return {
        "subject": row.subject,
        "gpu_count": row.gpu_count,
        "hours": row.hours,
        "today": mix_words(row.today, row.gpu_count),
        "recommended": mix_words(row.recommended, row.gpu_count),
        **_cost_cells(row.costs),
        "cost_recommended_idle_removed": round(row.costs_idle_removed.recommended, 2),
        "saving": round(row.saving, 2),
        "saving_idle_removed": round(row.saving_idle_removed, 2),
        "saving_if_usage_drops": round(row.saving_if_usage_drops, 2),
    }


def _total_row(report: PlansReport) -> dict[str, Any]:
    total, busy = report.total, report.total_idle_removed
    return {
        "subject": TOTAL,
        "gpu_count": sum(r.gpu_count for r in report.rows),
        "hours": max((r.hours for r in report.rows), default=0),
        "today": "",
        "recommended": "",
        **_cost_cells(total),
        "cost_recommended_idle_removed": round(busy.recommended, 2),
        "saving": round(total.today - total.recommended, 2),
        "saving_idle_removed": round(busy.today - busy.recommended, 2),
        "saving_if_usage_drops": round(sum(r.saving_if_usage_drops for r in report.rows), 2),
    }


def _cost_cells(costs: CostsOut) -> dict[str, float]:
    return {
        "cost_today": round(costs.today, 2),
        "cost_recommended": round(costs.recommended, 2),
        "cost_all_on_demand": round(costs.all_on_demand, 2),
        "cost_all_reserved": round(costs.all_reserved, 2),
    }


def table(report: PlansReport, iso: Any) -> Table:
    out = Table(
        title=f"plans, {iso(report.start)} to {iso(report.end)} "
        f"({(report.end - report.start) / 3600:.0f} h, {report.currency})",
        caption=_caption(report),
    )
    columns = ("pool", "GPUs", "today", "cheapest mix", "cost today", "cheapest",
               "all on demand", "all reserved", "cheapest, idle removed", "saving",
               f"saving if usage -{report.usage_drop:.0%}")  # fmt: skip
    for column in columns:
        out.add_column(
            column, justify="left" if column in ("pool", "today", "cheapest mix") else "right"
        )
    for i, row in enumerate(report.rows):
        cells = csv_row(row)
        out.add_row(
            row.subject, str(row.gpu_count), cells["today"], cells["recommended"],
            *_money(cells), end_section=i == len(report.rows) - 1,
        )  # fmt: skip
    total = _total_row(report)
    out.add_row(TOTAL, str(total["gpu_count"]), "", "", *_money(total))
    return out


def _money(cells: dict[str, Any]) -> list[str]:
    keys = ("cost_today", "cost_recommended", "cost_all_on_demand", "cost_all_reserved",
            "cost_recommended_idle_removed", "saving", "saving_if_usage_drops")  # fmt: skip
    return [f"{cells[k]:,.2f}" for k in keys]


def _caption(report: PlansReport) -> str:
    lines = [f"assumption: {report.assumption}", report.rule]
    util = report.utilisation
    if util.actual is None:
        lines.append(f"utilisation: no known GPU time (target {util.target:.0%})")
        return "\n".join(lines)
    lines.append(
        f"utilisation {util.actual:.0%} (active share of GPU time), target {util.target:.0%}, "
        f"gap {max(util.gap or 0.0, 0.0):.0%}"
    )
    for item in util.closing[:5]:
        lines.append(f"  {item.title}: utilisation to {item.utilisation_after:.0%}")
    if util.closing:
        lines.append(f"  all {len(util.closing)} open: utilisation to {util.after_all:.0%}")
    return "\n".join(lines)
