"""GPU health on the fleet tiles, on a demo with faulted and throttled GPUs
(``--pathologies``): each tile wears one badge per problem /v1/fleet names for its GPU, a
word as well as a colour, with the problem told in words in its tooltip and in the list
under the node's tiles; the fleet page still fits, speaks the language and passes axe in
every look with the badges on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.collector.web.demo_process import CHROMIUM, RunningDemo, running_demo
from tests.collector.web.test_browser import Tab, api
from tests.collector.web.test_console_looks import walk
from tests.e2e.test_demo_command import free_port_block

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian package chromium is not installed"),
]

BADGES = """ts => ts.map(t => [t.dataset.uuid, t.getAttribute("title"),
    [...t.querySelectorAll(".tile-badge")].map(b => [b.dataset.problem, b.textContent])])"""


@pytest.fixture(scope="module")
def demo() -> Iterator[RunningDemo]:
    # one plain node and three pathology nodes: faulted GPUs (XIDs, ECC), throttled ones
    with running_demo(free_port_block(5), options=["--nodes", "1", "--pathologies", "3"]) as run:
        yield run


def problems_by_gpu(demo: RunningDemo) -> dict[str, list[str]]:
    return {g["uuid"]: g["problems"] for g in api(demo, "/v1/fleet")["gpus"]}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_tile_wears_a_badge_per_problem_and_says_it_in_words(
    browser: Any, demo: RunningDemo, lang: str
) -> None:
    before = problems_by_gpu(demo)
    tab = Tab(browser, demo, lang=lang)
    page = tab.open("/ui/")
    tiles = page.locator(".tile").evaluate_all(BADGES)
    after = problems_by_gpu(demo)
    # a GPU whose problems moved while the page loaded (a new XID) proves nothing either way
    steady = {u for u in after if before.get(u) == after[u]}
    assert {p for u in steady for p in after[u]} >= {"xid", "ecc", "throttled"}
    compared = 0
    for uuid, title, badges in tiles:
        if uuid not in steady:
            continue
        compared += 1
        assert [p for p, _ in badges] == after[uuid], uuid
        assert all(word and "." not in word for _, word in badges), badges  # a word, not a key
        if after[uuid]:
            listed = page.locator(f".node-health li[data-uuid='{uuid}']").inner_text()
            assert listed and listed.split(" ", 1)[1] in title  # the same sentences
            if lang == "en" and "ecc" in after[uuid]:
                assert "uncorrected errors" in title
            if lang == "zh" and "throttled" in after[uuid]:
                assert "降频" in title
        else:
            assert page.locator(f".node-health li[data-uuid='{uuid}']").count() == 0
    assert compared == len(tiles) - len(set(after) - steady) > 0
    tab.close()
    assert tab.errors == []


def test_the_fleet_page_with_badges_fits_speaks_the_language_and_passes_axe(
    browser: Any, demo: RunningDemo
) -> None:
    found = walk(browser, demo, ["/ui/"])
    assert found == [], "\n".join(found[:40])
