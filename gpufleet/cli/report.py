"""``gpufleet report``: waste, energy and carbon by namespace, team, model or node over a period,
read from the collector's ledger, as a table, CSV or JSON.

The ledger keeps hourly totals, so the period is widened to the whole hours it touches
(from 22:15 means from 22:00); every output states the period its figures cover. Every
grouping adds up to the same fleet total: namespace and team have a row for the GPU time
nobody held, "(unallocated)".
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.config import AgentSettings
from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings
from collector.efficiency_report import Subject, efficiency_report
from collector.http.query import QueryError, parse_instant
from collector.ledger.store import Ledger
from collector.notify.report_mail import compose
from collector.plans_report import plans_report
from collector.records import OPEN_STATUSES, Usage
from collector.savings_report import savings_report
from collector.usage_report import PERIOD_RULE, GroupReport, group_report, ledger_period
from gpufleet.cli.report_bottlenecks import emit_bottlenecks
from gpufleet.cli.report_plans import emit_plans
from gpufleet.cli.report_savings import emit_savings
from gpufleet.settings import ConfigError, load_settings

_PERIOD = re.compile(r"^(\d+(?:\.\d+)?)([hdw])$")
_UNIT_SECONDS = {"h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
COLUMNS = ("group", "idle_gpu_hours", "waste", "gpu_hours", "cost", "energy_kwh",
           "estimated_energy_kwh", "carbon_kg")  # fmt: skip
#: CSV rows also carry the period they cover, so a file read alone says it
CSV_COLUMNS = (*COLUMNS, "period_start", "period_end")
TOTAL = "total"


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "report", help="waste, energy and carbon by namespace/team", description=__doc__
    )
    p.add_argument("--config", type=Path, help="the collector's YAML settings")
    p.add_argument(
        "--db", help="ledger: SQLite file or postgresql:// URL (default: from config, gpufleet.db)"
    )
    p.add_argument(
        "--by",
        choices=["namespace", "team", "user", "owner", "queue", "model", "node", "account"],
        default="namespace",
    )
    p.add_argument("--period", default="7d", help="how far back: e.g. 24h, 7d, 4w (default 7d)")
    p.add_argument(
        "--end", help="when the period ends: Unix seconds or ISO 8601, UTC by default (default now)"
    )
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument(
        "--plans",
        action="store_true",
        help="what-if costs of plans (today's mix, the cheapest, all on demand, all "
        "reserved) and the utilisation gap, instead of usage by group",
    )
    p.add_argument(
        "--savings",
        action="store_true",
        help="what the releases in the period freed: GPU-hours, money, energy (the body of "
        "GET /v1/savings), instead of usage by group",
    )
    p.add_argument(
        "--email-preview",
        action="store_true",
        help="print the efficiency report email (reports.every's period ending at --end) "
        "for --user or --team, as it would be sent",
    )
    p.add_argument("--user", help="with --email-preview: a user of the directory")
    p.add_argument("--team", help="with --email-preview: a team")
    p.add_argument(
        "--bottlenecks",
        action="store_true",
        help="why it wastes: each open bottleneck verdict (workload, cause, money per hour, "
        "the sentence) and each node's money on broken GPUs, instead of usage by group",
    )
    p.set_defaults(run=run)


def parse_period(text: str) -> float:
    """Seconds in ``text`` (``24h``, ``7d``, ``4w``); a negative or zero length is an error,
    not an empty report."""
    match = _PERIOD.match(text.strip())
    if match is None:
        if text.strip().startswith("-"):
            raise ConfigError(f"--period: a length of time back from --end, not negative "
                              f"(e.g. 7d), got {text!r}")  # fmt: skip
        raise ConfigError(f"--period: expected a number and h, d or w (e.g. 7d), got {text!r}")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise ConfigError(f"--period: must be longer than zero (e.g. 24h or 7d), got {text!r}")
    return seconds


def parse_end(text: str | None, now: float) -> float:
    if text is None:
        return now
    try:
        return parse_instant(text, "--end")
    except QueryError as err:
        raise ConfigError(str(err)) from None


def row_of(group: str, u: Usage) -> dict[str, Any]:
    return {
        "group": group,
        "idle_gpu_hours": round(u.idle_seconds / 3600, 3),
        "waste": round(u.idle_cost, 2),
        "gpu_hours": round((u.active_seconds + u.idle_seconds) / 3600, 3),
        "cost": round(u.cost, 2),
        "energy_kwh": round(u.energy_joules / 3.6e6, 3),
        "estimated_energy_kwh": round(u.estimated_energy_joules / 3.6e6, 3),
        "carbon_kg": round(u.carbon_grams / 1000, 3),
    }


def rows_for(usages: list[tuple[str, Usage]]) -> list[dict[str, Any]]:
    rows = [row_of(group, usage) for group, usage in usages]
    return sorted(rows, key=lambda r: (-r["waste"], r["group"]))


def run(args: argparse.Namespace) -> int:
    settings = load_settings(
        CollectorSettings, args.config, dict(os.environ), {"ledger.url": args.db},
        foreign=(AgentSettings,),
    )  # fmt: skip
    url = settings.ledger.url
    if "://" not in url and url != ":memory:" and not Path(url).exists():
        raise ConfigError(f"ledger.url: no ledger at {url!r} (run the collector first, or --db)")
    prices = (
        PriceBook.load(settings.pricing.price_book)
        if settings.pricing.price_book
        else PriceBook.example()
    )
    now = time.time()
    end = parse_end(args.end, now)
    period = ledger_period(end - parse_period(args.period), end, now)
    with Ledger.open(url) as ledger:
        if args.bottlenecks:
            emit_bottlenecks(ledger.recommendations(OPEN_STATUSES), args.format)
            return 0
        if args.plans:
            analysis = settings.analysis
            plans = plans_report(ledger, period, prices,
                                 max_term_months=analysis.pricing_max_term_months,
                                 utilisation_target=analysis.utilisation_target)  # fmt: skip
            emit_plans(plans, args.format, iso)
            return 0
        if getattr(args, "email_preview", False):
            print_preview(
                ledger, settings, args, end, now, settings.pricing.currency or prices.currency
            )
            return 0
        if getattr(args, "savings", False):
            currency = settings.pricing.currency or prices.currency
            saved = savings_report(ledger, end - parse_period(args.period), end, currency)
            emit_savings(saved, args.format, iso)
            return 0
        answer = group_report(ledger, args.by, period)
    emit(answer, args, settings.pricing.currency or prices.currency)
    return 0


def print_preview(
    ledger: Ledger,
    settings: CollectorSettings,
    args: argparse.Namespace,
    end: float,
    now: float,
    currency: str,
) -> None:
    if bool(args.user) == bool(args.team):
        raise ConfigError("--email-preview: give one of --user NAME or --team NAME")
    subject: Subject = "user" if args.user else "team"
    name = args.user or args.team
    every = settings.reports.every
    report = efficiency_report(ledger, subject, name, end, every, now, currency)
    contacts = settings.notifications.users if args.user else settings.notifications.teams
    contact = contacts.get(name)
    to = (contact.email if contact else "") or f"(no email for {subject} {name})"
    message = compose(report, settings.reports.smtp.sender or "gpufleet@localhost", to)
    sys.stdout.write(message.as_string())


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def emit(answer: GroupReport, args: argparse.Namespace, currency: str) -> None:
    rows, total = rows_for(answer.rows), row_of(TOTAL, answer.total)
    period = answer.period
    if args.format == "json":
        body = {
            "by": args.by,
            "period": args.period,
            "start": iso(period.start),
            "end": iso(period.end),
            "asked_start": iso(period.asked_start),
            "asked_end": iso(period.asked_end),
            "rule": PERIOD_RULE,
            "currency": currency,
            "rows": rows,
            "total": total,
        }
        json.dump(body, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        span = {"period_start": iso(period.start), "period_end": iso(period.end)}
        writer.writerows({**row, **span} for row in rows)
    else:
        _console().print(table(answer, rows, total, currency))


def table(
    answer: GroupReport, rows: list[dict[str, Any]], total: dict[str, Any], currency: str
) -> Table:
    """Rows, a total row, and a caption that says what the figures cover. The estimated
    energy column appears only when some energy was estimated (integrated power)."""
    period = answer.period
    columns = [c for c in COLUMNS if c != "estimated_energy_kwh" or total[c] > 0]
    shown = f"{_minute(period.start)} to {_minute(period.end)} UTC"
    out = Table(
        title=f"{answer.by}, {shown} ({period.seconds / 3600:.2f} h, {currency})",
        caption=_caption(answer, total),
    )
    for column in columns:
        out.add_column(column.replace("_", " "), justify="left" if column == "group" else "right")
    for i, row in enumerate(rows):
        out.add_row(*(_cell(row, c) for c in columns), end_section=i == len(rows) - 1)
    out.add_row(*(_cell(total, c) for c in columns))
    return out


def _cell(row: dict[str, Any], column: str) -> str:
    value = row[column]
    if column == "group":
        return str(value)
    return f"{value:.2f}" if column in ("waste", "cost") else f"{value:.3f}"


def _minute(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def _caption(answer: GroupReport, total: dict[str, Any]) -> str:
    asked = answer.period
    lines = [f"asked {iso(asked.asked_start)} to {iso(asked.asked_end)}; {PERIOD_RULE}"]
    if answer.by in ("namespace", "team", "user", "owner", "queue"):
        lines.append("(unallocated): GPU time no workload held")
    if total["estimated_energy_kwh"] == 0:
        lines.append("energy: all from NVML energy counters, none estimated from power")
    return "\n".join(lines)


def _console() -> Console:
    """Wide enough for workload names when writing to a file or a pipe."""
    console = Console()
    return console if console.is_terminal else Console(width=160)
