"""The console at 1,000 simulated GPUs (``gpufleet demo --nodes 125 --gpus-per-node 8``)
in headless Chromium: the fleet page becomes ready from the summary and the tiles of a page
of nodes, without downloading every GPU; the next page and "show all" fetch the rest; the
tables page, export and search their whole lists; every page passes the checks of
test_console_looks in every look."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.collector.web.demo_process import CHROMIUM, RunningDemo, running_demo
from tests.collector.web.test_browser import PAGES, Tab, api
from tests.collector.web.test_console_looks import walk
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
    """The /v1 responses a tab received: path, query and body bytes; the last summary; the
    GPUs of the last /v1/fleet read.

    The handler only keeps the responses: Playwright's sync API runs it in the driver's
    greenlet, and a body read there is a round trip that lets the test go on before the
    handler ends (under load a test once saw /v1/fleet answered and no GPU recorded). The
    bodies are read in the test's own thread, when it asks.
    """

    def __init__(self, page: Any) -> None:
        self.responses: list[Any] = []
        page.on("response", self.record)

    def record(self, response: Any) -> None:
        if urlsplit(response.url).path.startswith("/v1/"):
            self.responses.append(response)

    def _of(self, path: str) -> list[tuple[dict[str, list[str]], Any]]:
        found = []
        for response in list(self.responses):
            url = urlsplit(response.url)
            if url.path == path and response.status == 200:
                found.append((parse_qs(url.query), response))
        return found

    @property
    def seen(self) -> list[tuple[str, dict[str, list[str]], int]]:
        return [
            (urlsplit(r.url).path, parse_qs(urlsplit(r.url).query), len(r.body()))
            for r in list(self.responses)
        ]

    def bytes(self) -> int:
        return sum(size for _, _, size in self.seen)

    @property
    def summary(self) -> Any:
        answers = self._of("/v1/fleet/summary")
        return answers[-1][1].json() if answers else None

    @property
    def gpus(self) -> list[Any]:
        """Every GPU of the last /v1/fleet read: its first page and the cursor pages after
        it (a read without a cursor is a new one, such as the 15 s refresh under load)."""
        gpus: list[Any] = []
        for query, response in self._of("/v1/fleet"):
            if "cursor" not in query:
                gpus = []
            gpus += response.json()["gpus"]
        return gpus


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
    expected = ["/v1/fleet", "/v1/fleet/summary", "/v1/fleet/trend", "/v1/gpus/usage"]
    assert sorted(set(paths)) == expected, paths
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
    page.locator("[data-dt='nodes'] [data-page='next']").click()
    second = [n["node"] for n in requests.summary["nodes"][NODES_PER_PAGE : 2 * NODES_PER_PAGE]]
    page.locator(f".node[data-node='{second[0]}']").wait_for()
    assert page.locator(".node").evaluate_all("cs => cs.map(c => c.dataset.node)") == second
    page.locator("[data-dt='nodes'] [data-page='all']").click()
    page.locator(".node").nth(NODES - 1).wait_for()
    assert page.locator(".tile").count() == NODES * PER_NODE
    tab.close()
    assert tab.errors == []


def natural(name: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def test_the_node_list_sorts_naturally_filters_and_searches(
    browser: Any, demo: RunningDemo
) -> None:
    tab = Tab(browser, demo)
    page = tab.open("/ui/")
    page.select_option("[data-sort-by='nodes']", "node")
    names = sorted((n["node"] for n in api(demo, "/v1/fleet/summary")["nodes"]), key=natural)
    page.locator(f".node[data-node='{names[0]}']").wait_for()
    shown = page.locator(".node").evaluate_all("cs => cs.map(c => c.dataset.node)")
    assert shown == names[:NODES_PER_PAGE]  # gpu-node-2 before gpu-node-10
    page.fill("[data-search='nodes']", "node-10")
    page.locator("[data-figure='table-nodes']").filter(
        has_text=f"of {len([n for n in names if 'node-10' in n])}"
    ).wait_for()
    shown = page.locator(".node").evaluate_all("cs => cs.map(c => c.dataset.node)")
    assert shown == [n for n in names if "node-10" in n] and shown
    tab.close()
    assert tab.errors == []


def test_the_idle_table_pages_shows_all_and_exports_the_whole_filtered_list(
    browser: Any, demo: RunningDemo
) -> None:
    tab = Tab(browser, demo)
    requests = Requests(tab.page)  # the demo's clock moves a little: what the page read
    page = tab.open("/ui/idle")
    now = requests.summary["now"]
    idle = [g for g in requests.gpus if g["state"] in ("allocated_idle", "unallocated")]
    settled = [g for g in idle if g["idle_since"] is None or now - g["idle_since"] >= 60]
    assert len(settled) > 50, "enough idle GPUs for pages"
    assert page.locator("[data-figure='table-idle']").inner_text() == f"50 of {len(settled)}"
    assert page.locator("[data-table='idle'] tbody tr").count() == 50
    with page.expect_download() as download:
        page.locator("[data-csv='idle']").click()
    rows = list(csv.reader(io.StringIO(download.value.path().read_text(encoding="utf-8"))))
    assert rows[0][:3] == ["GPU", "Model", "Holder"] and len(rows) == len(settled) + 1
    labels = {f"{g['node']} #{g['index']}" for g in settled}
    assert {r[0] for r in rows[1:]} == labels
    unallocated = [g for g in settled if g["state"] == "unallocated"]
    page.select_option("[data-dt='idle'] [data-filter='state']", "unallocated")
    page.locator("[data-dt='idle'] [data-page='all']").click()
    page.locator("[data-figure='table-idle']").filter(
        has_text=f"{len(unallocated)} of {len(unallocated)}"
    ).wait_for()
    states = page.locator("[data-table='idle'] tbody tr").evaluate_all(
        "rs => rs.map(r => r.dataset.state)"
    )
    assert states == ["unallocated"] * len(unallocated)
    tab.close()
    assert tab.errors == []


def test_every_page_at_1000_gpus_fits_speaks_the_language_and_passes_axe(
    browser: Any, demo: RunningDemo
) -> None:
    found = walk(browser, demo, PAGES)
    assert found == [], "\n".join(found[:40])
