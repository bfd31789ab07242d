"""The console's workload page for pods on shared GPUs (``gpufleet demo --shared``) in
headless Chromium: the share each holds and how long its share has been idle on its own
equal what /v1/fleet answers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gpufleet.cli.demo_nodes import SHARED_NODE
from tests.collector.web.demo_process import CHROMIUM, RunningDemo, running_demo
from tests.collector.web.test_browser import Tab, api
from tests.e2e.test_demo_command import free_port_block

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian package chromium is not installed"),
]


@pytest.fixture(scope="module")
def demo() -> Iterator[RunningDemo]:
    with running_demo(free_port_block(4), options=["--nodes", "1", "--shared"]) as running:
        yield running


def minutes(text: str) -> int:
    """'1 h 05 min' or '7 min' as minutes."""
    found = re.fullmatch(r"(?:(\d+) h )?(\d+) min", text.strip())
    assert found is not None, text
    return int(found.group(1) or 0) * 60 + int(found.group(2))


def test_a_shared_pods_page_shows_its_share_and_its_own_idle_time(
    browser: Any, demo: RunningDemo
) -> None:
    fleet = api(demo, "/v1/fleet")
    sliced = next(g for g in fleet["gpus"] if g["node"] == SHARED_NODE and g["index"] == 0)
    # a pod that never uses its part is idle on its own the longest ...
    idle_key = min(sliced["holders_idle_since"], key=sliced["holders_idle_since"].get)
    assert "sweep-worker" in idle_key
    # ... while the serving pod kept the board busy meanwhile: active now, or idle only
    # since after it (between two requests; the state is the newest 5 s reading's)
    assert sliced["state"] in ("active", "allocated_idle")
    if sliced["state"] == "allocated_idle":
        assert sliced["idle_since"] > sliced["holders_idle_since"][idle_key]
    assert sliced["holder_fractions"][idle_key] == pytest.approx(1 / 3)
    tab = Tab(browser, demo)
    try:
        page = tab.open("/ui/workload?" + str(httpx.QueryParams(key=idle_key)))
        assert tab.figure("gpu-share") == pytest.approx(33.3)
        shown = minutes(page.locator("[data-figure='idle-own']").inner_text())
        expected = (fleet["now"] - sliced["holders_idle_since"][idle_key]) / 60
        assert abs(shown - expected) <= 2, (shown, expected)
        assert shown >= 60  # two simulated hours of history, all of them idle for it
    finally:
        tab.close()
    assert tab.errors == []
