"""The read schema (schema V7, docs/ledger-postgresql.md): its views answer what the
ledger's own queries answer (the truth here), on both backends; and every panel query of
the committed PostgreSQL dashboard (dashboards/postgresql/gpufleet-ledger.json) runs, as
Grafana expands its macros, on a real PostgreSQL ledger with data and returns those figures."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator

import psycopg
import pytest

from collector.ledger.store import Ledger, LedgerWrite
from collector.records import DAY_SECONDS, HOUR_SECONDS, Usage
from tests.collector.ledger.test_store import JOB, POD, registered
from tests.paths import REPO
from tests.postgres import PostgresServer

DAY0 = 1_700_006_400.0  # a UTC midnight
DAYS = 3
BOARD = REPO / "dashboards" / "postgresql" / "gpufleet-ledger.json"


def fill(ledger: Ledger) -> None:
    registered(ledger)
    write = LedgerWrite()
    for h in range(DAYS * 24):
        hour = DAY0 + h * HOUR_SECONDS
        for key, uuid, scale in ((POD.key, "G1", 1.0), (JOB.key, "G2", 2.0)):
            usage = Usage(idle_seconds=60.0 * scale, idle_cost=0.5 * scale,
                          energy_joules=3.6e5 * scale + h, carbon_grams=h)  # fmt: skip
            write.workload_usage[(hour, key)] = usage
            write.gpu_usage[(hour, uuid)] = usage
    ledger.commit(write)


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    with Ledger.open(ledger_url) as opened:
        fill(opened)
        yield opened


def test_waste_and_energy_views_equal_the_ledger_queries(ledger: Ledger) -> None:
    end = DAY0 + DAYS * DAY_SECONDS
    rows = ledger.read(lambda c: c.execute(
        "SELECT team, SUM(idle_cost), SUM(idle_gpu_hours) FROM waste_daily_by_team "
        "WHERE day_start >= ? AND day_start < ? GROUP BY team ORDER BY team", (DAY0, end),
    ).fetchall())  # fmt: skip
    truth = ledger.usage_by_group(DAY0, end, "team")
    assert rows == [(team, u.idle_cost, pytest.approx(u.idle_seconds / 3600)) for team, u in truth]
    energy = ledger.read(lambda c: dict(c.execute(
        "SELECT workload_key, SUM(energy_kwh) FROM energy_daily_by_workload GROUP BY 1"
    ).fetchall()))  # fmt: skip
    want = {ref.key: u.energy_joules / 3.6e6 for ref, u in ledger.usage_by_workload(DAY0, end)}
    assert energy == pytest.approx(want)


def grafana_sql(sql: str, start: float, end: float) -> str:
    """The panel's SQL as Grafana sends it for the range [start, end] (Unix seconds)."""
    return re.sub(r"\$__unixEpochFilter\((\w+)\)", rf"\1 >= {start:.0f} AND \1 <= {end:.0f}", sql)


def test_every_dashboard_panel_query_returns_the_ledger_figures(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    with Ledger.open(url) as ledger:
        fill(ledger)
        by_team = {
            team: u for team, u in ledger.usage_by_group(DAY0, DAY0 + DAYS * DAY_SECONDS, "team")
        }
    board = json.loads(BOARD.read_text())
    start, end = DAY0, DAY0 + DAYS * DAY_SECONDS - 1
    results: dict[str, list[tuple[object, ...]]] = {}
    with psycopg.connect(url) as conn:
        for panel in board["panels"]:
            (target,) = panel["targets"]
            assert target["datasource"]["type"] == "grafana-postgresql-datasource"
            results[panel["title"]] = conn.execute(
                grafana_sql(target["rawSql"], start, end)
            ).fetchall()
    assert all(results.values()), [t for t, r in results.items() if not r]
    cost: dict[str, float] = defaultdict(float)
    for _, team, value in results["Idle cost per team per day"]:
        cost[team] += value
    assert cost == pytest.approx({team: u.idle_cost for team, u in by_team.items()})
    table = {row[0]: row[3] for row in results["Workloads by energy over the range"]}
    assert table[JOB.key] > table[POD.key]  # largest energy first
    assert list(table) == [JOB.key, POD.key]
