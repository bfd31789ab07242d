"""The probes tell the truth when PostgreSQL goes away: the real app over the real core on a
PostgreSQL ledger of its own server (tests/postgres.py), which the test then stops.

The URL carries a password (the test server trusts every local connection, so it is
never checked): no answer, log line or error may show it; they name the server instead.
"""

from __future__ import annotations

import logging

import msgspec
import pytest

from collector.config import CollectorSettings
from collector.http.app import create_app
from collector.ledger.store import Ledger
from collector.service import CollectorCore
from tests.collector.http.test_app import JSON, served
from tests.collector.test_core import T0, batch, example_rates
from tests.postgres import start_postgres

SECRET = "s3cret-pw"


def test_a_stopped_postgresql_makes_the_collector_not_ready_naming_it_without_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = start_postgres()
    url = server.new_database().replace("gpufleet@", f"gpufleet:{SECRET}@")
    core = CollectorCore.build(CollectorSettings(), Ledger.open(url), example_rates(),
                               lambda: T0 + 200)  # fmt: skip
    app = create_app(core.service, CollectorSettings(), ["t0ken"], lambda: T0 + 200)
    headers = {**JSON, "Authorization": "Bearer t0ken"}
    try:
        with served(app) as client:
            first = msgspec.json.encode(batch(1, range(0, 60, 10)))
            assert client.post("/v1/batches", content=first, headers=headers).is_success
            assert client.get("/readyz").json() == {"ready": True, "problems": []}
            server.stop()
            second = msgspec.json.encode(batch(2, range(60, 120, 10)))
            refused = client.post("/v1/batches", content=second, headers=headers)
            assert refused.status_code == 503  # not acknowledged: the agent keeps it
            core.applier.tick(flush=True)
            readyz = client.get("/readyz")
            assert readyz.status_code == 503
            problems = " ".join(readyz.json()["problems"])
            assert "does not answer" in problems and f"127.0.0.1:{server.port}" in problems
            assert client.get("/healthz").json()["ledger_ok"] is False
            assert client.get("/livez").json() == {"live": True}
            shown = problems + refused.text + caplog.text
            assert SECRET not in shown and "gpufleet:***@" in problems
    finally:
        server.stop()
        core.close()
        with caplog.at_level(logging.CRITICAL):
            core.ledger.close()
