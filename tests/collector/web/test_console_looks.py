"""Every console page at 32 simulated GPUs in English and Chinese, light and dark, at
1280x800 and 390x844: no horizontal overflow (nor a table cut at 1280 px), no text outside
the page language's catalogue, no serious axe-core violation (colour contrast among them).
tests/collector/web/test_browser_scale.py walks the same at 1,000 GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.collector.web.console_checks import LOOKS, open_context, problems
from tests.collector.web.demo_process import CHROMIUM, RunningDemo, running_demo
from tests.collector.web.test_browser import DEMO_OPTIONS, PAGES, api
from tests.e2e.test_demo_command import free_port_block

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian package chromium is not installed"),
]


@pytest.fixture(scope="module")
def demo() -> Iterator[RunningDemo]:
    with running_demo(free_port_block(5), options=DEMO_OPTIONS) as running:
        yield running


def every_page(demo: RunningDemo) -> list[str]:
    held = next(g for g in api(demo, "/v1/fleet")["gpus"] if g["workloads"])
    workload = "/ui/workload?" + str(httpx.QueryParams(key=held["workloads"][0]["key"]))
    return [*PAGES, workload, "/ui/recommendations?status=all", "/ui/no-such-page"]


def walk(browser: Any, demo: RunningDemo, paths: list[str]) -> list[str]:
    """Every problem of every page in every look, named by look and path."""
    found = []
    for look in LOOKS:
        context = open_context(browser, demo, look)
        page = context.new_page()
        for path in paths:
            page.goto(demo.url + path)
            page.wait_for_selector("body[data-ready='1']", timeout=20_000)
            found += [f"{look} {path}: {problem}" for problem in problems(page, look)]
        context.close()
    return found


def test_every_page_fits_speaks_the_language_and_passes_axe_in_every_look(
    browser: Any, demo: RunningDemo
) -> None:
    found = walk(browser, demo, every_page(demo))
    assert found == [], "\n".join(found[:40])


def test_the_catalogue_walk_finds_a_word_the_catalogue_lacks(
    browser: Any, demo: RunningDemo
) -> None:
    """The walk can fail: a text node added outside the catalogue is reported, in either
    language, and one marked translate="no" (data) is not."""
    look = LOOKS[0]
    context = open_context(browser, demo, look)
    page = context.new_page()
    page.goto(demo.url + "/ui/")
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    page.evaluate("""() => {
        const p = document.createElement("p"); p.textContent = "Frobnicated nodes";
        const q = document.createElement("p"); q.textContent = "gpu-node-xyz"; q.translate = false;
        document.querySelector("main").append(p, q);
    }""")
    found = problems(page, look)
    context.close()
    assert [f for f in found if "catalogue" in f] == [
        "not in the en catalogue: 'Frobnicated' in 'Frobnicated nodes'"
    ]
