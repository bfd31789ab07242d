"""``gpufleet report --savings``: each release in the period and what it freed up to the
period's end, with the one-line summary; table, CSV or JSON (``GET /v1/savings``'s body)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable

import msgspec
from rich.console import Console
from rich.table import Table

from collector.savings_report import SavingsReport

CSV_COLUMNS = ("workload_key", "released_at", "by", "gpus", "freed_gpu_hours", "money",
               "energy_kwh", "carbon_kg")  # fmt: skip


def emit_savings(report: SavingsReport, fmt: str, iso: Callable[[float], str]) -> None:
    if fmt == "json":
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
        sys.stdout.write("\n")
        return
    rows = [msgspec.structs.asdict(r) for r in report.releases]
    if fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows({**r, "released_at": iso(r["released_at"])} for r in rows)
        return
    table = Table(title=f"releases {iso(report.start)} to {iso(report.end)} ({report.currency})",
                  caption=f"{report.summary}\n{report.rule}")  # fmt: skip
    for column in CSV_COLUMNS:
        table.add_column(column.replace("_", " "))
    for r in rows:
        table.add_row(*(iso(r[c]) if c == "released_at" else str(r[c]) for c in CSV_COLUMNS))
    console = Console()
    (console if console.is_terminal else Console(width=160)).print(table)
