"""Failed authentication is limited per client address (collector/http/auth_limit.py):
past the burst an address is answered 429 with Retry-After, without its token being
checked, logged once (the address, never a token) and counted; the table of addresses
stays bounded. Over real HTTP on loopback, with a refill slow enough that none happens
while the test runs (so no assert depends on timing), and on the limiter itself with a
clock the test moves."""

from __future__ import annotations

import logging

import pytest

from agent.model import encode_batch
from collector.http.app import create_app
from collector.http.auth_limit import FailureLimiter
from tests.collector.http.test_app import AUTH, JSON, TOKEN, served, settings
from tests.collector.http.test_app_fake import NOW, FakeBackend, make_batch

BURST = 5


def test_past_the_burst_an_address_gets_429_with_retry_after_even_with_a_good_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    config = settings(auth_failures_per_second=0.001, auth_failure_burst=BURST)
    backend = FakeBackend(settings=config)
    with served(create_app(backend, config, [TOKEN], clock=lambda: NOW)) as client:
        wrong = {"Authorization": f"Bearer {TOKEN}-guess"}
        statuses = [client.get("/v1/fleet", headers=wrong).status_code for _ in range(BURST)]
        assert statuses == [401] * BURST
        limited = [client.get("/v1/fleet", headers=wrong) for _ in range(3)]
        batch = encode_batch(make_batch())
        good = client.post("/v1/batches", content=batch, headers={**AUTH, **JSON})
        for response in (*limited, good):
            assert response.status_code == 429
            assert response.json()["reason"] == "rate_limited"
            assert int(response.headers["retry-after"]) == 1000  # one failure refills in 1000 s
        assert backend.ingested == []
        metrics = client.get("/metrics").text
    assert 'gpufleet_collector_auth_failures_total{reason="invalid"} 5.0' in metrics
    assert 'gpufleet_collector_auth_failures_total{reason="rate_limited"} 4.0' in metrics
    warnings = [r.getMessage() for r in caplog.records if r.name == "collector.http.auth_limit"]
    assert len(warnings) == 1 and warnings[0].startswith("client 127.0.0.1: more than 5 failed")
    assert TOKEN not in caplog.text


def test_a_good_token_costs_nothing_and_refill_lifts_the_limit() -> None:
    now = [0.0]
    limiter = FailureLimiter(rate_per_second=10.0, burst=BURST, clock=lambda: now[0])
    for _ in range(BURST):
        assert limiter.retry_after("10.0.0.1") is None
        limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") == 1
    assert limiter.retry_after("10.0.0.2") is None  # another address is not limited
    now[0] += 0.1  # one failure's worth refilled
    assert limiter.retry_after("10.0.0.1") is None
    limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") == 1


def test_the_table_of_addresses_is_bounded() -> None:
    limiter = FailureLimiter(rate_per_second=1.0, burst=1, clock=lambda: 0.0, max_addresses=100)
    for i in range(10_000):
        limiter.failed(f"10.{i // 256 // 256}.{i // 256 % 256}.{i % 256}")
    assert limiter.addresses() == 100
    # the most recent failures are the ones kept
    assert limiter.retry_after("10.0.39.15") == 1  # address number 9,999
    assert limiter.retry_after("10.0.0.0") is None  # evicted: starts again with a full bucket
