"""`gpufleet report --plans` on a ledger the demo wrote (`gpufleet demo --db`, 3 simulated
hours of 2 nodes), in table, CSV and JSON, against `GET /v1/plans` for the same period
and against figures read from the ledger by another path (per-GPU usage x prices)."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from collector.ledger.store import Ledger
from gpufleet.cli.collector import build_collector
from tests.collector.http.test_app_fake import AsgiClient
from tests.ports import free_port_block

TOKEN = "plans-token-0123456789abcdef"
HOUR = 3600.0


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, float]:
    """The demo's ledger, and the last two whole hours it covers: (db, start, end)."""
    db = tmp_path_factory.mktemp("plans") / "demo.db"
    port = free_port_block(3)
    subprocess.run(
        [sys.executable, "-m", "gpufleet", "demo", "--nodes", "2", "--history", "3",
         "--duration", "0.5", "--plain", "--db", str(db), "--port", str(port)],
        capture_output=True, text=True, check=True, timeout=240,
    )  # fmt: skip
    end = math.floor(time.time() / HOUR) * HOUR
    return db, end - 2 * HOUR, end


def report(db: Path, end: float, fmt: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "gpufleet", "report", "--plans", "--db", str(db),
         "--period", "2h", "--end", str(end), "--format", fmt],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return out.stdout


def api(db: Path, start: float, end: float) -> Any:
    settings = CollectorSettings(
        server=ServerSettings(tokens=[TOKEN]), ledger=LedgerSettings(url=str(db))
    )
    collector = build_collector(settings, clock=time.time, tokens=frozenset([TOKEN]))
    try:
        client = AsgiClient(collector.app)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        response = client.get(f"/v1/plans?start={start}&end={end}", headers=auth)
        backwards = client.get(f"/v1/plans?start={end}&end={start}", headers=auth)
        assert backwards.status_code == 422 and backwards.json()["field"] == "start"
    finally:
        collector.core.close()
        collector.ledger.close()
    assert response.status_code == 200, response.text
    return response.json()


def test_json_equals_the_api_and_the_ledger(demo_db: tuple[Path, float, float]) -> None:
    db, start, end = demo_db
    body = json.loads(report(db, end, "json"))
    assert body == api(db, start, end)
    assert (body["start"], body["end"]) == (start, end)
    rows, total = body["rows"], body["total"]
    assert {r["subject"] for r in rows} == {"model:H100", "model:A100"}  # the demo's 2 nodes
    for scenario in ("today", "recommended", "all_on_demand", "all_reserved"):
        assert total[scenario] == pytest.approx(sum(r["costs"][scenario] for r in rows))
    # by another path: every allocated GPU-second at its on-demand price, and every GPU
    # of the pool reserved for every hour of the period
    prices = PriceBook.example()
    with Ledger.open(str(db)) as ledger:
        per_gpu = ledger.usage_by_gpu(start, end)
    by_model: dict[str, float] = {}
    for gpu, usage in per_gpu:
        held = usage.active_seconds + usage.allocated_idle_seconds
        by_model[gpu.model] = by_model.get(
            gpu.model, 0.0
        ) + held / HOUR * prices.price_per_gpu_hour(gpu.model)
    for row in rows:
        model = row["model"]
        assert row["hours"] == 2
        assert row["costs"]["all_on_demand"] == pytest.approx(by_model[model], rel=1e-9)
        reserved = prices.price_per_gpu_hour(model, plan="reserved")
        assert row["costs"]["all_reserved"] == pytest.approx(row["gpu_count"] * reserved * 2)
        # the cheapest mix never costs more than either extreme
        assert row["costs"]["recommended"] <= min(row["costs"]["all_on_demand"],
                                                   row["costs"]["all_reserved"]) + 1e-9  # fmt: skip
    util = body["utilisation"]
    assert util["target"] == 0.7 and 0 < util["actual"] < 1


def test_csv_and_table_show_the_same_totals(demo_db: tuple[Path, float, float]) -> None:
    db, _, end = demo_db
    total = json.loads(report(db, end, "json"))["total"]
    rows = list(csv.DictReader(io.StringIO(report(db, end, "csv"))))
    assert rows[-1]["subject"] == "total" and len(rows) == 3
    for scenario in ("today", "recommended", "all_on_demand", "all_reserved"):
        assert float(rows[-1][f"cost_{scenario}"]) == pytest.approx(total[scenario], abs=0.006)
    table = report(db, end, "table")
    assert "total" in table and f"{total['today']:,.2f}" in table
    assert "utilisation" in table and "target 70%" in table
