"""``gpufleet report``: waste, energy and carbon by namespace, team, model or node over a period,
read from the collector's ledger, as a table, CSV or JSON."""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings
from collector.ledger.store import Ledger
from collector.records import Usage
from gpufleet.settings import ConfigError, load_settings

_PERIOD = re.compile(r"^(\d+(?:\.\d+)?)([hdw])$")
_UNIT_SECONDS = {"h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
COLUMNS = ("group", "idle_gpu_hours", "waste", "gpu_hours", "cost", "energy_kwh",
           "estimated_energy_kwh", "carbon_kg")  # fmt: skip


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "report", help="waste, energy and carbon by namespace/team", description=__doc__
    )
    p.add_argument("--config", type=Path, help="the collector's YAML settings")
    p.add_argument("--db", help="ledger: SQLite file (default: from config, gpufleet.db)")
    p.add_argument("--by", choices=["namespace", "team", "model", "node"], default="namespace")
    p.add_argument("--period", default="7d", help="how far back: e.g. 24h, 7d, 4w (default 7d)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(run=run)


def parse_period(text: str) -> float:
    match = _PERIOD.match(text.strip())
    if match is None:
        raise ConfigError(f"--period: expected a number and h, d or w (e.g. 7d), got {text!r}")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def rows_for(usages: list[tuple[str, Usage]]) -> list[dict[str, Any]]:
    rows = []
    for group, u in usages:
        known = u.active_seconds + u.idle_seconds
        rows.append(
            {
                "group": group or "(none)",
                "idle_gpu_hours": round(u.idle_seconds / 3600, 3),
                "waste": round(u.idle_cost, 2),
                "gpu_hours": round(known / 3600, 3),
                "cost": round(u.cost, 2),
                "energy_kwh": round(u.energy_joules / 3.6e6, 3),
                "estimated_energy_kwh": round(u.estimated_energy_joules / 3.6e6, 3),
                "carbon_kg": round(u.carbon_grams / 1000, 3),
            }
        )
    return sorted(rows, key=lambda r: (-r["waste"], r["group"]))


def run(args: argparse.Namespace) -> int:
    settings = load_settings(
        CollectorSettings, args.config, dict(os.environ), {"ledger.url": args.db}
    )
    url = settings.ledger.url
    if "://" not in url and url != ":memory:" and not Path(url).exists():
        raise ConfigError(f"ledger.url: no ledger at {url!r} (run the collector first, or --db)")
    prices = (
        PriceBook.load(settings.pricing.price_book)
        if settings.pricing.price_book
        else PriceBook.example()
    )
    end = time.time()
    start = end - parse_period(args.period)
    with Ledger.open(url) as ledger:
        rows = rows_for(ledger.usage_by_group(start, end, args.by))
    emit(rows, args, settings.pricing.currency or prices.currency)
    return 0


def emit(rows: list[dict[str, Any]], args: argparse.Namespace, currency: str) -> None:
    if args.format == "json":
        json.dump(
            {"by": args.by, "period": args.period, "currency": currency, "rows": rows},
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    elif args.format == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    else:
        table = Table(title=f"last {args.period} by {args.by} ({currency})")
        for column in COLUMNS:
            table.add_column(
                column.replace("_", " "), justify="left" if column == "group" else "right"
            )
        for row in rows:
            table.add_row(*(str(row[c]) for c in COLUMNS))
        _console().print(table)


def _console() -> Console:
    """Wide enough for workload names when writing to a file or a pipe."""
    console = Console()
    return console if console.is_terminal else Console(width=160)
