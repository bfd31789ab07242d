"""``gpufleet demo --db postgresql://...`` from the command line, on the session's real
PostgreSQL: the demo runs, prints its summary, and leaves its fleet in that database.
(``gpufleet collector --ledger postgresql://...``: test_restart_postgres.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

from collector.ledger.store import Ledger
from tests.e2e.collector_process import ROOT
from tests.ports import free_port_block
from tests.postgres import PostgresServer

pytestmark = pytest.mark.slow


def test_demo_on_postgresql_keeps_its_fleet_there(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    port = free_port_block(5)
    command = [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "demo",
               "--duration", "3", "--plain", "--port", str(port), "--db", url]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "GPUs               32:" in done.stdout
    with Ledger.open(url) as ledger:
        assert ledger.dialect == "postgresql"
        assert len(ledger.gpus()) == 32
        assert ledger.usage_totals_by_gpu()  # the demo's history was committed there


def test_collector_help_names_the_ledger_url() -> None:
    done = subprocess.run([sys.executable, "-m", "gpufleet", "collector", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "--ledger" in done.stdout and "postgresql://" in done.stdout
