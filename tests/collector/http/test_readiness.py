"""Liveness and readiness through the real app over the real core and a real SQLite ledger.

Issue 17, defect 2: ``/healthz`` answered 200 ``ledger_ok: true`` while every commit failed.
Here the ledger refuses commits (a trigger another connection puts on the cursors table,
as a damaged or foreign schema would), the applier ticks as its job would, and the probes
and ``/metrics`` are read over HTTP; then the trigger goes and the next tick commits.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from collector.config import CollectorSettings
from collector.http.app import create_app
from collector.ledger.store import Ledger
from collector.metrics.cache import Exposition
from collector.service import CollectorCore
from tests.collector.http.test_app import JSON, served
from tests.collector.test_core import T0, batch, example_rates


@pytest.fixture
def core(tmp_path: Path) -> Iterator[CollectorCore]:
    core = CollectorCore.build(
        CollectorSettings(),
        Ledger.open(str(tmp_path / "ledger.db")),
        example_rates(),
        lambda: T0 + 200,
    )
    yield core
    core.close()
    core.ledger.close()


def scraped(client: httpx.Client, name: str) -> str:
    text = client.get("/metrics").text
    return "\n".join(re.findall(rf"^{name}(?:{{.*}})? .*$", text, re.MULTILINE))


def test_readiness_follows_failing_commits_and_liveness_does_not(
    core: CollectorCore, tmp_path: Path
) -> None:
    exposition = Exposition(lambda: T0 + 200, max_age_seconds=15.0)
    core.observers.attach(exposition)  # as gpufleet collector wires it: commits refresh it
    app = create_app(
        core.service, CollectorSettings(), ["t0ken"], lambda: T0 + 200, exposition=exposition
    )
    with served(app) as client:
        headers = {**JSON, "Authorization": "Bearer t0ken"}
        body = msgspec.json.encode(batch(1, range(0, 60, 10)))
        assert client.post("/v1/batches", content=body, headers=headers).is_success
        assert client.get("/readyz").json() == {"ready": True, "problems": []}
        refuse = sqlite3.connect(tmp_path / "ledger.db")
        refuse.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON cursors "
            "BEGIN SELECT RAISE(ABORT, 'cursor refused'); END"
        )
        refuse.commit()
        core.applier.tick()
        readyz, healthz = client.get("/readyz"), client.get("/healthz")
        assert readyz.status_code == 503 and healthz.status_code == 503
        (problem,) = readyz.json()["problems"]
        assert "ledger commits fail" in problem and "cursor refused" in problem
        assert healthz.json()["ledger_ok"] is False
        assert healthz.json()["write_path"]["commit_failures"] == {"other": 1}
        assert healthz.json()["write_path"]["backlog_batches"] == 1
        assert client.get("/livez").json() == {"live": True}
        assert scraped(client, "gpufleet_collector_ledger_up").endswith(" 0.0")
        assert scraped(client, "gpufleet_collector_ready").endswith(" 0.0")
        assert 'reason="other"} 1.0' in scraped(client, "gpufleet_collector_commit_failures_total")
        assert scraped(client, "gpufleet_collector_intake_pending_batches").endswith(" 1.0")
        assert scraped(client, "gpufleet_collector_last_commit_timestamp_seconds") == ""
        refuse.execute("DROP TRIGGER refuse")
        refuse.commit()
        refuse.close()
        core.applier.tick()  # a failed commit is due again at once
        assert client.get("/readyz").status_code == 200
        assert client.get("/healthz").json()["ledger_ok"] is True
        assert scraped(client, "gpufleet_collector_ready").endswith(" 1.0")
        core.applier.tick(flush=True)  # the rest of the batch: the log has nothing pending
        assert scraped(client, "gpufleet_collector_intake_pending_batches").endswith(" 0.0")
        last = scraped(client, "gpufleet_collector_last_commit_timestamp_seconds")
        assert float(last.split()[-1]) == T0 + 200
