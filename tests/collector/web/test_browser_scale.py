"""The console's fleet page at 1,000 simulated GPUs (``gpufleet demo --nodes 125
--gpus-per-node 8``) in headless Chromium: it becomes ready from the summary and the
tiles of its first nodes, without downloading every GPU; "show more" adds the next."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.collector.web.demo_process import CHROMIUM, RunningDemo, running_demo
from tests.collector.web.test_browser import Tab, api
from tests.e2e.test_demo_command import free_port_block

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian package chromium is not installed"),
]

NODES, PER_NODE = 125, 8
#: nodes whose tiles the page draws at first (collector/web/static/page_fleet.js)
NODES_PER_PAGE = 24


@pytest.fixture(scope="module")
def demo() -> Iterator[RunningDemo]:
    options = ["--nodes", str(NODES), "--gpus-per-node", str(PER_NODE)]
    with running_demo(free_port_block(NODES + 2), history_hours=0.1, options=options) as running:
        yield running


class Requests:
    """The /v1 responses a tab received: path, query and body bytes; the last summary."""

    def __init__(self, page: Any) -> None:
        self.seen: list[tuple[str, dict[str, list[str]], int]] = []
        self.summary: Any = None
        page.on("response", self.record)

    def record(self, response: Any) -> None:
        url = urlsplit(response.url)
        if url.path.startswith("/v1/"):
            self.seen.append((url.path, parse_qs(url.query), len(response.body())))
        if url.path == "/v1/fleet/summary":
            self.summary = response.json()

    def bytes(self) -> int:
        return sum(size for _, _, size in self.seen)


def test_the_fleet_page_is_ready_at_1000_gpus_without_downloading_every_gpu(
    browser: Any, demo: RunningDemo
) -> None:
    summary = api(demo, "/v1/fleet/summary")
    assert sum(summary["summary"]["gpus_by_state"].values()) == NODES * PER_NODE
    headers = {"Authorization": f"Bearer {demo.token}"}
    whole = httpx.get(demo.url + "/v1/fleet", headers=headers, timeout=30).content
    tab = Tab(browser, demo)  # opens /ui/ and waits until it is ready
    requests = Requests(tab.page)
    page = tab.open("/ui/")
    paths = [path for path, _, _ in requests.seen]
    assert sorted(set(paths)) == ["/v1/fleet", "/v1/fleet/summary", "/v1/gpus/usage"], paths
    for path, query, _ in requests.seen:  # every GPU list asked is a page or a filter
        if path == "/v1/fleet":
            assert len(query["node"][0].split(",")) == NODES_PER_PAGE
        if path == "/v1/gpus/usage":
            assert query["limit"] == ["1"]
    assert requests.bytes() < len(whole) / 3, (requests.bytes(), len(whole))
    assert tab.figure("gpus") == NODES * PER_NODE
    assert tab.figure("nodes") == NODES
    first = [n["node"] for n in requests.summary["nodes"][:NODES_PER_PAGE]]
    cards = page.locator(".node").evaluate_all("cs => cs.map(c => c.dataset.node)")
    assert cards == first  # the summary's order: most waste first
    assert page.locator(".tile").count() == NODES_PER_PAGE * PER_NODE
    page.locator("[data-more='nodes']").click()
    page.locator(".node").nth(2 * NODES_PER_PAGE - 1).wait_for()
    assert page.locator(".tile").count() == 2 * NODES_PER_PAGE * PER_NODE
    tab.close()
    assert tab.errors == []
