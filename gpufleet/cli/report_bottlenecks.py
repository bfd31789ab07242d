"""``gpufleet report --bottlenecks``: why the GPUs waste. Each open bottleneck
recommendation's verdicts (a workload, a likely cause, its money per hour, the sentence)
and each node's money on broken GPUs, read from the ledger's recommendations: the figures
``GET /v1/recommendations`` serves, most money first. Table, CSV or JSON."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from collector.records import Recommendation, RecommendationKind

KINDS = (RecommendationKind.BOTTLENECK, RecommendationKind.BROKEN_GPUS)
CSV_COLUMNS = ("id", "kind", "subject", "cause", "gpus", "money_per_hour", "currency",
               "reason")  # fmt: skip


def bottleneck_rows(recs: list[Recommendation]) -> list[dict[str, Any]]:
    """One row per verdict of a bottleneck recommendation and per condition of a
    broken_gpus one, most money first; money as the recommendation's evidence has it."""
    rows = []
    for rec in recs:
        if rec.kind is RecommendationKind.BOTTLENECK:
            rows += [_verdict_row(rec, v) for v in _items(rec.evidence.get("verdicts"))]
        elif rec.kind is RecommendationKind.BROKEN_GPUS:
            rows += _broken_rows(rec)
    return sorted(rows, key=lambda r: (-r["money_per_hour"], r["subject"], r["cause"]))


def _verdict_row(rec: Recommendation, verdict: dict[str, Any]) -> dict[str, Any]:
    gpus = verdict.get("gpus") or rec.gpu_uuids
    return {
        "id": rec.id,
        "kind": rec.kind.value,
        "subject": rec.subject,
        "cause": verdict["cause"],
        "gpus": len(gpus),
        "money_per_hour": verdict["money_per_hour"],
        "currency": rec.savings.currency,
        "reason": f"{verdict['reason']}; {verdict['advice']}",
        "sentence": rec.title,
    }


def _broken_rows(rec: Recommendation) -> list[dict[str, Any]]:
    by_condition: dict[str, list[dict[str, Any]]] = {}
    for gpu in _items(rec.evidence.get("broken")):
        by_condition.setdefault(str(gpu["condition"]), []).append(gpu)
    missing = rec.evidence.get("missing_gpus") or []
    if isinstance(missing, list) and missing:
        money = rec.evidence.get("missing_per_hour", 0.0)
        by_condition["missing"] = [{"money_per_hour": money, "gpu": g} for g in missing]
    return [
        {
            "id": rec.id,
            "kind": rec.kind.value,
            "subject": rec.subject,
            "cause": condition,
            "gpus": len(gpus),
            "money_per_hour": sum(float(g["money_per_hour"]) for g in gpus),
            "currency": rec.savings.currency,
            "reason": ", ".join(sorted({str(g.get("workload") or "") for g in gpus} - {""})),
            "sentence": rec.title,
        }
        for condition, gpus in by_condition.items()
    ]


def _items(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def emit_bottlenecks(recs: list[Recommendation], fmt: str) -> None:
    """Write the rows to stdout as ``fmt`` (table, csv or json)."""
    rows = bottleneck_rows(recs)
    if fmt == "json":
        sys.stdout.write(json.dumps({"rows": rows}, indent=2) + "\n")
    elif fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    else:
        console = Console()
        (console if console.is_terminal else Console(width=200)).print(_table(rows))


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="Why it wastes: open bottleneck and broken-GPU recommendations")
    for column in ("subject", "cause", "gpus", "money / h", "why"):
        table.add_column(column, justify="right" if column in ("gpus", "money / h") else "left")
    for r in rows:
        money = f"{r['money_per_hour']:.2f} {r['currency']}"
        table.add_row(r["subject"], r["cause"], str(r["gpus"]), money, r["sentence"])
    if not rows:
        table.caption = "no open bottleneck or broken-GPU recommendation"
    return table
