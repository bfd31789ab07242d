"""Fixtures the agent's shipper tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent.test_shipper import FakeCollector


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    """A FakeCollector on loopback, stopped after the test (unless the test stopped it)."""
    server = FakeCollector()
    server.start()
    yield server
    if server._server is not None:
        server.stop()
