"""Admission control over real HTTP against a real core: past ``server.max_inflight_bytes``,
``server.max_queued_batches`` or ``server.max_loop_lag_seconds`` a batch is answered 429 with
Retry-After before its body is read, every batch admitted is stored, and /healthz answers
while the queue is full.

The ingest thread is held by a ledger observer (the one hook observers attach through)
that waits at ``batches_stored`` until the test opens it: a slow disk, seen from the edge."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from collector.config import CollectorSettings, ServerSettings
from collector.ledger.observers import StoredBatch
from collector.ledger.store import LedgerWrite
from tests.collector.bounds_rig import HEADERS, Rig, node_body, rig
from tests.collector.test_core import T0


class Gate:
    """Holds the ingest thread in ``batches_stored`` until ``open``."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        self.entered.set()
        self.opened.wait(30)

    def write_committed(self, write: LedgerWrite) -> None:
        pass


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)


def gauge(r: Rig, name: str) -> float:
    for family in text_string_to_metric_families(r.http.get("/metrics").text):
        if family.name == name:
            return float(family.samples[0].value)
    raise AssertionError(f"{name} not on /metrics")


def post(r: Rig, body: bytes) -> httpx.Response:
    return httpx.post(
        str(r.http.base_url.join("/v1/batches")), content=body, headers=HEADERS, timeout=8
    )


def test_bodies_past_the_inflight_bound_get_429_and_the_admitted_are_all_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bodies = [node_body(f"n{i}", 60, 1, T0, first=0) for i in range(6)]
    size = max(len(b) for b in bodies)
    server = ServerSettings(max_body_bytes=size, max_inflight_bytes=3 * size + size // 2)
    gate = Gate()
    with rig(tmp_path / "ledger.db", CollectorSettings(server=server), T0 + 10) as r:
        r.core.observers.attach(gate)
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = [pool.submit(post, r, body) for body in bodies]
            until(lambda: sum(a.done() for a in answers) == 3)  # the 429s, while 3 wait
            assert gauge(r, "gpufleet_collector_inflight_bytes") >= 3 * min(map(len, bodies))
            assert gauge(r, "gpufleet_collector_queued_batches") == 3
            gate.opened.set()
            responses = [a.result() for a in answers]
        statuses = sorted(response.status_code for response in responses)
        assert statuses == [200, 200, 200, 429, 429, 429]
        for response in responses:
            if response.status_code == 429:
                assert 1 <= int(response.headers["Retry-After"]) <= 30
                assert response.json()["reason"] == "overloaded"
                assert "server.max_inflight_bytes" in response.json()["error"]
        stored = {f"n{i}" for i, resp in enumerate(responses) if resp.status_code == 200}
        assert r.fleet_nodes() == dict.fromkeys(stored, 60)  # every admitted batch is stored
        assert gauge(r, "gpufleet_collector_inflight_bytes") == 0
        assert gauge(r, "gpufleet_collector_queued_batches") == 0
        metrics = r.http.get("/metrics").text
        assert 'gpufleet_collector_rejected_batches_total{reason="overloaded"} 3.0' in metrics
        shed = [r for r in caplog.records if "429 overloaded" in r.getMessage()]
        assert [r.levelno for r in shed] == [logging.WARNING]  # three shed, logged once


def test_a_full_queue_answers_429_and_healthz_still_answers(tmp_path: Path) -> None:
    server = ServerSettings(max_queued_batches=2)
    gate = Gate()
    with rig(tmp_path / "ledger.db", CollectorSettings(server=server), T0 + 10) as r:
        r.core.observers.attach(gate)
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, r, node_body("a", 1, 1, T0))
            assert gate.entered.wait(10)  # the ingest thread is held with it
            second = pool.submit(post, r, node_body("b", 1, 1, T0))
            until(lambda: gauge(r, "gpufleet_collector_queued_batches") == 2)
            refused = post(r, node_body("c", 1, 1, T0))
            assert refused.status_code == 429, refused.text
            assert 1 <= int(refused.headers["Retry-After"]) <= 30
            assert "server.max_queued_batches" in refused.json()["error"]
            health = r.http.get("/healthz", timeout=5)
            assert health.status_code == 200
            gate.opened.set()
            assert (first.result().status_code, second.result().status_code) == (200, 200)
        assert r.fleet_nodes() == {"a": 1, "b": 1}
        # drained: the next batch is admitted again
        assert post(r, node_body("c", 1, 1, T0)).status_code == 200


async def _hog_the_loop(request: Request) -> Response:
    """The test's own route: holds the event loop 1.5 s, as a saturated loop does."""
    time.sleep(1.5)
    return PlainTextResponse("done")


def test_batches_while_the_event_loop_lags_get_429_and_are_taken_again_after(
    tmp_path: Path,
) -> None:
    """Past its knee the collector's event loop, not its queue, is what saturates: a
    batch arriving while the loop runs behind is shed, and taken again once it keeps up."""
    server = ServerSettings(max_loop_lag_seconds=0.5)
    routes = [Route("/test/hog", _hog_the_loop)]
    with rig(tmp_path / "ledger.db", CollectorSettings(server=server), T0 + 10, routes) as r:
        assert post(r, node_body("a", 1, 1, T0)).status_code == 200  # starts the probe
        assert r.http.get("/test/hog", timeout=10).text == "done"
        refused = post(r, node_body("a", 1, 2, T0))
        assert refused.status_code == 429, refused.text
        assert refused.json()["reason"] == "overloaded"
        assert "server.max_loop_lag_seconds" in refused.json()["error"]
        assert 2 <= int(refused.headers["Retry-After"]) <= 30  # twice the lag, whole seconds
        assert gauge(r, "gpufleet_collector_event_loop_lag_seconds") >= 1.0
        time.sleep(2.5)  # the lag leaves the 2 s window
        assert post(r, node_body("a", 1, 2, T0)).status_code == 200
        assert gauge(r, "gpufleet_collector_event_loop_lag_seconds") < 0.5
        metrics = r.http.get("/metrics").text
        assert 'gpufleet_collector_rejected_batches_total{reason="overloaded"} 1.0' in metrics
