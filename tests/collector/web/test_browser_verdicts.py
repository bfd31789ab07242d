"""The recommendations page on a demo with every pathology (``--pathologies``): bottleneck
and broken-GPU recommendations show their sentence, their evidence in words, and each
bottleneck verdict's cause, unused money and advice, in English and Chinese."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.collector.web.demo_process import CHROMIUM, ROOT, RunningDemo, running_demo
from tests.collector.web.test_browser import Tab, api
from tests.e2e.test_demo_command import free_port_block

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian package chromium is not installed"),
]

I18N = (ROOT / "collector/web/static/i18n.js").read_text(encoding="utf-8")
KINDS = ("bottleneck", "broken_gpus")


@pytest.fixture(scope="module")
def demo() -> Iterator[RunningDemo]:
    # one plain node and the three pathology nodes: every verdict, XIDs/ECC, a GPU off the bus
    with running_demo(free_port_block(5), options=["--nodes", "1", "--pathologies", "3"]) as run:
        yield run


def catalogue(lang: str) -> set[str]:
    """The keys of one language's strings in i18n.js."""
    start = I18N.index(f"  {lang}: {{")
    end = I18N.index("\n  },", start)
    return set(re.findall(r'"([\w.]+)":', I18N[start:end]))


def recs_of(demo: RunningDemo) -> list[dict[str, Any]]:
    recs = [r for r in api(demo, "/v1/recommendations")["recommendations"] if r["kind"] in KINDS]
    assert {r["kind"] for r in recs} == set(KINDS), "the pathology demo shows both kinds"
    assert any(r["evidence"].get("verdicts") for r in recs), "and bottleneck verdicts"
    return recs


def test_every_evidence_key_cause_and_condition_is_in_both_catalogues(demo: RunningDemo) -> None:
    recs = recs_of(demo)
    needed = {f"ev.{key}" for r in recs for key in r["evidence"]}
    needed |= {f"cause.{v['cause']}" for r in recs for v in r["evidence"].get("verdicts", [])}
    needed |= {f"advice.{v['cause']}" for r in recs for v in r["evidence"].get("verdicts", [])}
    needed |= {f"cond.{c}" for r in recs for c in r["evidence"].get("broken_by_condition", {})}
    for lang in ("en", "zh"):
        assert not sorted(needed - catalogue(lang)), lang


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bottleneck_and_broken_gpu_rows_say_why_in_words(
    browser: Any, demo: RunningDemo, lang: str
) -> None:
    recs = recs_of(demo)
    tab = Tab(browser, demo, lang=lang)
    page = tab.open("/ui/recommendations")
    for rec in recs:
        row = page.locator(f"tr[data-rec='{rec['id']}']")
        if lang == "en":  # the sentence (English: the console shows it in English only)
            assert rec["title"] in row.inner_text()
        values = row.locator(".evidence dd").all_inner_texts()
        assert not [v for v in values if v.startswith("{")], values  # no raw JSON
        shown = row.locator(".verdicts li")
        verdicts = rec["evidence"].get("verdicts", [])
        assert shown.count() == len(verdicts)
        for i, verdict in enumerate(verdicts):
            text = shown.nth(i).inner_text()
            assert shown.nth(i).get_attribute("data-cause") == verdict["cause"]
            assert f"{verdict['money_per_hour']:.2f}" in text.replace(",", "")
            assert "_" not in text, text  # the cause in words, not its key
            if lang == "zh":  # Chinese words, not the English advice
                assert verdict["advice"] not in text and re.search(r"[\u4e00-\u9fff]", text)
            else:
                assert verdict["advice"] in text
    tab.close()
    assert tab.errors == []
