"""``kill -9`` the collector mid-stream on a PostgreSQL ledger, restart it: totals equal the
truth, nothing counted twice. The same run as test_restart.py's (a real ``gpufleet
collector`` subprocess, simulated agents here), with ``--ledger postgresql://...`` on the
session's real PostgreSQL 15: an acknowledged batch is committed to ``intake_batches``
before the 2xx, so after the kill it waits there (asserted), and the restart replays it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.sources.simulated.source import build_fleet
from collector.ledger.store import Ledger
from gpufleet.cli.demo_fleet import SimClock
from tests.e2e.collector_process import CollectorProcess
from tests.e2e.fleet_rig import TOKEN, build_agent, free_port
from tests.e2e.test_restart import (
    HISTORY_SECONDS,
    STEP_SECONDS,
    apply_the_rest,
    check_against_truth,
    drain,
    stream,
)
from tests.postgres import PostgresServer

pytestmark = pytest.mark.slow


def test_kill_9_on_postgresql_loses_nothing_and_counts_nothing_twice(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    start = time.time() - HISTORY_SECONDS
    fleet = build_fleet(start_time=start)
    clock = SimClock(start)
    config = tmp_path / "collector.yaml"
    config.write_text(f"analysis:\n  stale_after_seconds: {3 * STEP_SECONDS}\n")
    url = postgres.new_database()
    collector = CollectorProcess(config, free_port(), url, TOKEN, tmp_path / "collector.log")
    agents = [build_agent(node, collector.url, clock, STEP_SECONDS, tmp_path / node.name)
              for node in fleet.nodes]  # fmt: skip
    try:
        collector.start()
        stream(fleet, clock, agents, collector, url)  # asserts pending rows after a kill
        drain(agents)
        collector.terminate()
    finally:
        collector.stop_if_running()
        for agent in agents:
            agent.shipper.close()
    assert all(a.stats.snapshot().spool_dropped_batches_total == 0 for a in agents)
    with Ledger.open(url) as ledger:
        assert ledger.dialect == "postgresql"
    apply_the_rest(config, url)
    check_against_truth(fleet, url, start, clock())
