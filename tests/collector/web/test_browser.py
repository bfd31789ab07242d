"""The console in headless Chromium (Debian's chromium, driven by Playwright) against a
running ``gpufleet demo``: every page loads without console errors in both languages, and
every figure it shows equals what the API answers for the same moment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.collector.web.demo_process import CHROMIUM, RunningDemo, running_demo
from tests.e2e.test_demo_command import free_port_block

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian package chromium is not installed"),
]

PAGES = ["/ui/", "/ui/idle", "/ui/recommendations", "/ui/energy", "/ui/plans", "/ui/savings"]
DEMO_OPTIONS = ["--nodes", "3", "--spare"]
WASTING = ("allocated_idle", "unallocated")


@pytest.fixture(scope="module")
def demo() -> Iterator[RunningDemo]:
    # three nodes that run work and one nobody uses (a scale-down): 32 GPUs
    with running_demo(free_port_block(5), options=DEMO_OPTIONS) as running:
        yield running


class Tab:
    """One signed-in browser tab that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any, demo: RunningDemo, lang: str = "en", scheme: str = "light",
                 viewport: tuple[int, int] = (1280, 800)):  # fmt: skip
        width, height = viewport
        self.context = browser.new_context(viewport={"width": width, "height": height},
                                           color_scheme=scheme, locale="en-US")  # fmt: skip
        self.context.add_init_script(f"localStorage.setItem('gpufleet.lang', '{lang}')")
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.demo = demo
        self.open(demo.console_url.replace(demo.url, ""))

    def open(self, path: str) -> Any:
        self.page.goto(self.demo.url + path)
        self.page.wait_for_selector("body[data-ready='1']", timeout=20_000)
        return self.page

    def figure(self, name: str) -> float:
        return number(self.page.locator(f"[data-figure='{name}']").inner_text())

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Any, demo: RunningDemo) -> Iterator[Tab]:
    opened = Tab(browser, demo)
    yield opened
    opened.close()
    assert opened.errors == []


def api(demo: RunningDemo, path: str, **params: object) -> Any:
    headers = {"Authorization": f"Bearer {demo.token}"}
    response = httpx.get(demo.url + path, params=params, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def number(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text))


def shown(text_or_value: float | str, expected: float, digits: int) -> bool:
    """The page's figure is ``expected`` rounded to ``digits`` decimals."""
    value = number(text_or_value) if isinstance(text_or_value, str) else text_or_value
    return abs(value - expected) <= 0.5 * 10**-digits + 1e-9


def today(now: float) -> dict[str, float]:
    start = now // 86400 * 86400
    return {"start": start, "end": max(now, start + 1)}


def test_every_page_loads_without_console_errors_in_both_languages_at_laptop_width(
    browser: Any, demo: RunningDemo
) -> None:
    workload = next(g for g in api(demo, "/v1/fleet")["gpus"] if g["workloads"])["workloads"][0]
    paths = [*PAGES, "/ui/workload?" + httpx.QueryParams(key=workload["key"]).__str__()]
    for lang, fleet_word in (("en", "Fleet"), ("zh", "集群")):
        tab = Tab(browser, demo, lang=lang)
        for path in paths:
            page = tab.open(path)
            assert page.locator("[data-nav='fleet']").inner_text() == fleet_word
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280, path
            assert demo.token not in page.content()
        tab.close()
        assert tab.errors == [], lang


def test_the_header_wraps_on_a_phone_and_keeps_language_and_sign_out_on_screen(
    browser: Any, demo: RunningDemo
) -> None:
    """At 390 px the header used to run 610-770 px wide, the language picker and sign-out
    off screen. Now no page is wider than the phone, and both controls lie within it."""
    for lang in ("en", "zh"):
        tab = Tab(browser, demo, lang=lang, viewport=(390, 844))
        for path in PAGES:
            page = tab.open(path)
            assert page.evaluate("document.documentElement.scrollWidth") <= 390, (lang, path)
        for control in ("#lang", "#signout"):
            box = page.locator(control).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, control
        tab.close()
        assert tab.errors == [], lang


def test_fleet_page_figures_equal_the_api(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/")
    fleet = api(demo, "/v1/fleet")
    usage = api(demo, "/v1/gpus/usage", **today(fleet["now"]))
    price = {g["uuid"]: g["price_per_hour"] for g in usage["gpus"]}
    summary = fleet["summary"]
    assert tab.figure("gpus") == len(fleet["gpus"]) == 32
    assert shown(tab.figure("utilisation"), summary["utilisation_ratio"] * 100, 1)
    assert shown(tab.figure("power"), summary["power_watts"] / 1000, 2)
    waste_now = sum(price[g["uuid"]] for g in fleet["gpus"] if g["state"] in WASTING)
    assert waste_now > 0 and shown(tab.figure("waste-now"), waste_now, 2)
    waste_today = sum(g["usage"]["idle_cost"] for g in usage["gpus"])
    assert waste_today > 0 and shown(tab.figure("waste-today"), waste_today, 2)
    for state, count in summary["gpus_by_state"].items():
        assert tab.figure(f"state-{state}") == count
    pairs = "ts => ts.map(t => [t.dataset.uuid, t.dataset.state])"
    tiles = page.locator(".tile").evaluate_all(pairs)
    assert dict(tiles) == {g["uuid"]: g["state"] for g in fleet["gpus"]}


def test_idle_page_lists_the_idle_gpus_with_holder_price_and_energy(
    tab: Tab, demo: RunningDemo
) -> None:
    page = tab.open("/ui/idle")
    fleet = api(demo, "/v1/fleet")
    usage = {g["uuid"]: g for g in api(demo, "/v1/gpus/usage", **today(fleet["now"]))["gpus"]}
    idle = {g["uuid"]: g for g in fleet["gpus"] if g["state"] in WASTING}
    rows = page.locator("[data-table='idle'] tbody tr, [data-table='idle-short'] tbody tr")
    assert tab.figure("idle-count") == rows.count() == len(idle) > 0
    listed = page.locator("[data-table='idle'] tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.uuid)"
    )
    prices = [usage[uuid]["price_per_hour"] for uuid in listed]
    assert prices == sorted(prices, reverse=True)  # the most expensive first
    short = page.locator("[data-table='idle-short'] tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.uuid)"
    )
    for uuid in short:  # apart: idle under a minute, between a bursty job's requests
        assert fleet["now"] - idle[uuid]["idle_since"] < 60
    for uuid in listed:
        assert idle[uuid]["idle_since"] is None or fleet["now"] - idle[uuid]["idle_since"] >= 60
    owned = 0
    for i in range(rows.count()):  # text_content: the short ones sit in a closed <details>
        row = rows.nth(i)
        gpu = idle[row.get_attribute("data-uuid")]
        team = ", ".join(" · ".join(x for x in (w["team"], w["user"]) if x)
                         for w in gpu["workloads"] if w["team"] or w["user"]) or "—"  # fmt: skip
        assert row.locator("[data-col='team']").text_content() == team
        owners = list(dict.fromkeys(w["owner"] for w in gpu["workloads"] if w["owner"]))
        assert row.locator("[data-col='owner']").text_content() == (", ".join(owners) or "—")
        owned += bool(owners)
        holders = [w["key"] for w in gpu["workloads"]] or ["(unallocated)"]
        assert row.locator("[data-col='holder']").text_content() == ", ".join(holders)
        assert shown(row.locator("[data-col='price']").text_content(),
                     usage[gpu["uuid"]]["price_per_hour"], 2)  # fmt: skip
        idle_kwh = usage[gpu["uuid"]]["usage"]["idle_energy_joules"] / 3.6e6
        assert shown(row.locator("[data-col='idle-energy']").text_content(), idle_kwh, 2)
        assert shown(row.locator("[data-col='power']").text_content(), gpu["power_watts"], 0)
    assert owned > 0  # the demo's held idle GPUs name their owners


def test_workload_page_charts_hold_the_series_the_api_answers(tab: Tab, demo: RunningDemo) -> None:
    fleet = api(demo, "/v1/fleet")
    key = next(g for g in fleet["gpus"] if g["workloads"] and g["state"] == "active")[
        "workloads"][0]["key"]  # fmt: skip
    page = tab.open("/ui/workload?" + str(httpx.QueryParams(key=key)))
    now = fleet["now"]
    # its KPIs over the window of its charts: 6 h unless picked
    report = next(w for w in api(demo, "/v1/workloads", start=now - 6 * 3600, end=now)["workloads"]
                  if w["key"] == key)  # fmt: skip
    assert shown(tab.figure("energy"), report["usage"]["energy_joules"] / 3.6e6, 2)
    assert shown(tab.figure("carbon"), report["usage"]["carbon_grams"] / 1000, 2)
    assert tab.figure("episodes") == report["idle_episodes"]
    held = [g for g in fleet["gpus"] if any(w["key"] == key for w in g["workloads"])]
    assert tab.figure("gpus-now") == len(held)
    charts = {
        "activity": ("sm_activity", 100.0),
        "power": ("power_watts", 1.0),
        "memory": ("memory_used_bytes", 2.0**-30),
    }  # shown as %, W and GiB
    for chart, (field, scale) in charts.items():
        paths = page.locator(f"[data-chart='{chart}'] path.line")
        assert paths.count() == len(held)
        for i, gpu in enumerate(held):
            series = api(demo, f"/v1/gpus/{gpu['uuid']}/series", start=now - 6 * 3600, end=now + 1)
            points = [p[field] for p in series["points"] if p[field] is not None]
            assert len(points) >= 100  # two simulated hours at one bucket a minute
            assert int(paths.nth(i).get_attribute("data-points")) == len(points)
            last = page.locator(f"[data-chart='{chart}'] li").nth(i).locator("[data-last]")
            assert float(last.get_attribute("data-last")) == pytest.approx(points[-1] * scale)


def test_energy_page_by_namespace_equals_the_api(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/energy")
    now = api(demo, "/v1/fleet")["now"]
    workloads = api(demo, "/v1/workloads", **today(now))["workloads"]
    gpus = api(demo, "/v1/gpus/usage", **today(now))["gpus"]
    fleet_joules = sum(g["usage"]["energy_joules"] for g in gpus)
    assert shown(tab.figure("energy"), fleet_joules / 3.6e6, 2)
    expected: dict[str, float] = {}
    for w in workloads:
        name = w["namespace"] or "(none)"
        expected[name] = expected.get(name, 0.0) + w["usage"]["energy_joules"]
    expected["(unallocated)"] = fleet_joules - sum(w["usage"]["energy_joules"] for w in workloads)
    rows = page.locator("[data-table='namespace'] tbody tr")
    shown_rows = {rows.nth(i).get_attribute("data-group"): rows.nth(i) for i in range(rows.count())}
    assert set(shown_rows) == set(expected)
    for name, joules in expected.items():
        assert shown(shown_rows[name].locator("[data-col='kwh']").inner_text(), joules / 3.6e6, 2)


def test_energy_page_by_owner_equals_the_api(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/energy")
    now = api(demo, "/v1/fleet")["now"]
    workloads = api(demo, "/v1/workloads", **today(now))["workloads"]
    expected: dict[str, float] = {}
    for w in workloads:
        owner = w["owner"] or "(none)"
        expected[owner] = expected.get(owner, 0.0) + w["usage"]["energy_joules"]
    assert len(expected) > 1 and "(none)" not in expected  # the demo's pods and jobs: owned
    rows = page.locator("[data-table='owner'] tbody tr")
    shown_rows = {rows.nth(i).get_attribute("data-group"): rows.nth(i) for i in range(rows.count())}
    assert set(shown_rows) == {*expected, "(unallocated)"}
    for name, joules in expected.items():
        assert shown(shown_rows[name].locator("[data-col='kwh']").inner_text(), joules / 3.6e6, 2)


def test_energy_page_names_each_workloads_team_and_owner(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/energy")
    now = api(demo, "/v1/fleet")["now"]
    workloads = {w["key"]: w for w in api(demo, "/v1/workloads", **today(now))["workloads"]}
    rows = page.locator("[data-table='workloads'] tbody tr")
    assert rows.count() > 0
    for i in range(rows.count()):
        row = rows.nth(i)
        report = workloads[row.get_attribute("data-workload")]
        assert report["owner"] and report["team"]  # the demo's simulated pods and jobs
        assert row.locator("[data-col='owner']").inner_text() == report["owner"]


def test_plans_page_equals_the_api(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/plans")
    now = api(demo, "/v1/fleet")["now"]
    report = api(demo, "/v1/plans", start=now - 30 * 86400, end=now)
    assert report["rows"], "the demo's pools"
    assert shown(tab.figure("cost-today"), report["total"]["today"], 2)
    assert shown(tab.figure("cost-recommended"), report["total"]["recommended"], 2)
    rows = page.locator("[data-table='plans'] tbody tr")
    pools = [rows.nth(i).get_attribute("data-pool") for i in range(rows.count())]
    assert pools == [r["subject"] for r in report["rows"]] + ["total"]
    for i, row in enumerate(report["rows"]):
        cell = rows.nth(i).locator("[data-col='all_on_demand']").inner_text()
        assert shown(cell, row["costs"]["all_on_demand"], 2)
    gap = page.locator("[data-figure='utilisation-gap']").inner_text()
    assert "70.0%" in gap


def test_savings_page_equals_the_api(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/savings")
    now = api(demo, "/v1/fleet")["now"]
    report = api(demo, "/v1/savings", start=now - 7 * 86400, end=now)
    # the demo releases nothing (no policy): the page says so, with the API's figures
    # the sentence in the page's language with the API's figures (the API's own is English)
    hours, money = report["released_gpu_hours"], report["money"]
    summary = f"gpufleet released {hours:.2f} idle GPU-hours: {money:,.2f} {report['currency']}"
    assert summary in page.locator("[data-figure='savings-summary']").inner_text()
    assert shown(tab.figure("freed-gpu-hours"), report["released_gpu_hours"], 2)
    assert shown(tab.figure("money"), report["money"], 2)
    assert page.locator("[data-table='savings']").count() == (1 if report["releases"] else 0)


def test_evidence_reads_as_words_in_both_languages(browser: Any, demo: RunningDemo) -> None:
    """Evidence used to show raw keys ("window seconds", "whole node false", "price per
    hour 13.76" with no unit) and full GPU uuids over six lines. Every evidence key the demo's
    recommendations carry is in both catalogues: labels are words, GPUs a count, prices a
    currency per hour, and the Chinese labels are not the English ones."""
    recs = api(demo, "/v1/recommendations")["recommendations"]
    keys = {key for rec in recs for key in list(rec["evidence"])[:7]}
    assert keys, "the demo has recommendations with evidence"
    labels = {}
    for lang in ("en", "zh"):
        tab = Tab(browser, demo, lang=lang)
        page = tab.open("/ui/recommendations")
        terms = page.locator(".evidence dt").all_inner_texts()
        values = page.locator(".evidence dd").all_inner_texts()
        assert not [
            term for term in terms if "_" in term or term in {k.replace("_", " ") for k in keys}
        ]
        assert not [v for v in values if re.search(r"GPU-[0-9a-f]{4,}", v)], lang
        assert not [v for v in values if v in ("true", "false")], lang
        labels[lang] = set(terms)
        tab.close()
        assert tab.errors == [], lang
    assert labels["en"].isdisjoint(labels["zh"] - {"GPU"})


def test_recommendations_page_shows_savings_grouped_by_kind(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/recommendations")
    recs = api(demo, "/v1/recommendations")["recommendations"]
    rows = page.locator("[data-table='recommendations'] tbody tr[data-rec]")
    # grouped by kind, most saving first within a kind (the API's order)
    grouped = sorted(recs, key=lambda r: r["kind"])
    assert [rows.nth(i).get_attribute("data-rec") for i in range(rows.count())] == [
        r["id"] for r in grouped] and recs  # fmt: skip
    heads = page.locator("tr.dt-group").evaluate_all("hs => hs.map(h => h.dataset.groupRow)")
    assert heads == sorted({r["kind"] for r in recs})
    recs = grouped
    for i, rec in enumerate(recs):
        for col, field in (("money", "money_per_month"), ("kwh", "energy_kwh_per_month"),
                           ("kg", "carbon_kg_per_month")):  # fmt: skip
            assert shown(rows.nth(i).locator(f"[data-col='{col}']").inner_text(),
                         rec["savings"][field], 0)  # fmt: skip
    assert shown(tab.figure("rec-money"), sum(r["savings"]["money_per_month"] for r in recs), 0)


def expected_command(key: str, owner_kind: str, owner_name: str) -> str:
    """What an operator types to free the GPUs of ``key`` (its controller's, for a pod)."""
    if key.startswith("slurm:"):
        return f"scancel {key.removeprefix('slurm:')}"
    namespace, pod = key.removeprefix("pod:").split("/")
    if owner_kind == "Deployment":
        return f"kubectl scale deployment -n {namespace} {owner_name} --replicas=0"
    return f"kubectl delete pod -n {namespace} {pod}"


def test_each_recommendation_names_its_owner_team_and_the_command_that_acts(
    browser: Any, demo: RunningDemo
) -> None:
    """The owner column showed the namespace and no command: now the workload's owner (the
    top of its owner chain), its team and user, and for a release the command the chat
    message gives (a Deployment's pod scaled to zero, not deleted); in Chinese the title is
    Chinese, the English sentence in its tooltip."""
    recs = api(demo, "/v1/recommendations")["recommendations"]
    releases = [r for r in recs if r["kind"] == "release_idle"]
    assert releases and all(r["team"] and r["owner"] for r in releases), "the demo's pods"
    for lang in ("en", "zh"):
        tab = Tab(browser, demo, lang=lang)
        page = tab.open("/ui/recommendations")
        for rec in releases:
            row = page.locator(f"tr[data-rec='{rec['id']}']")
            kind, name = rec["owner"].split("/")[0], rec["owner"].split("/")[-1]
            assert row.locator("[data-col='owner']").inner_text().split("\n") == [
                f"{kind} {name}", f"{rec['team']} · {rec['user']}"]  # fmt: skip
            assert rec["command"] == expected_command(rec["workload_key"], kind, name)
            expected = rec["command"]
            assert row.locator("[data-command]").inner_text() == expected
            title = row.locator("[data-title]")
            assert title.get_attribute("title") == rec["title"]
            if lang == "en":
                assert title.inner_text() == rec["title"]
            else:
                assert title.inner_text().startswith(f"释放 {rec['workload_key']} 占用的")
        # grouped by team: a head for each team the releases name
        page.select_option("#recommendations-group", "team")
        heads = page.locator("tr.dt-group").evaluate_all("hs => hs.map(h => h.dataset.groupRow)")
        assert {r["team"] for r in releases} <= set(heads), heads
        tab.close()
        assert tab.errors == [], lang
    assert {r["command"] for r in recs if r["kind"] != "release_idle"} <= {""}


def test_console_asks_for_the_token_and_refuses_a_wrong_one(
    browser: Any, demo: RunningDemo
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(demo.url + "/ui/")
    page.wait_for_selector("body[data-ready='login']")
    assert page.locator("#login").is_visible() and page.locator("#main").is_hidden()
    page.fill("#token", "not-the-token")
    page.click("#login button[type=submit]")
    page.wait_for_selector("#login-error:not([hidden])")
    assert "refused" in page.locator("#login-error").inner_text()
    page.fill("#token", demo.token)
    page.click("#login button[type=submit]")
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("[data-figure='gpus']").inner_text() == "32"
    assert demo.token not in page.content() and demo.token not in page.url
    assert page.evaluate("sessionStorage.getItem('gpufleet.token')") == demo.token
    page.click("#signout")
    assert page.evaluate("sessionStorage.getItem('gpufleet.token')") is None
    context.close()


SCHEMES = [("light", "rgb(246, 247, 249)"), ("dark", "rgb(18, 21, 27)")]


@pytest.mark.parametrize(("scheme", "background"), SCHEMES)
def test_light_and_dark_follow_the_system(
    browser: Any, demo: RunningDemo, scheme: str, background: str
) -> None:
    tab = Tab(browser, demo, scheme=scheme)
    assert tab.page.evaluate("getComputedStyle(document.body).backgroundColor") == background
    tab.close()
    assert tab.errors == []


def status_of(demo: RunningDemo, rec_id: str) -> str:
    every = api(demo, "/v1/recommendations", status="all")["recommendations"]
    return str(next(r for r in every if r["id"] == rec_id)["status"])


@pytest.mark.parametrize("prefix", ["release_idle:pod:", "release_idle:slurm:", "scale_down:"])
def test_dismiss_asks_first_and_undo_restores_it(tab: Tab, demo: RunningDemo, prefix: str) -> None:
    """Pod ids hold a slash (they used to 404); every kind of subject: confirm, dismiss,
    then Undo within its seconds, and the collector has it open again."""
    recs = api(demo, "/v1/recommendations")["recommendations"]
    victim = next(r["id"] for r in recs if r["id"].startswith(prefix))
    page = tab.open("/ui/recommendations")
    row = page.locator(f"tr[data-rec='{victim}']")
    row.locator("[data-dismiss]").click()
    row.locator("[data-cancel]").click()  # asked first: cancel leaves it alone
    assert status_of(demo, victim) == "open"
    row.locator("[data-dismiss]").click()
    row.locator("[data-confirm]").click()
    page.wait_for_selector(f"tr[data-rec='{victim}']", state="detached", timeout=10_000)
    assert status_of(demo, victim) == "dismissed"
    page.locator(f"#toast [data-undo='{victim}']").click()
    page.wait_for_selector(f"tr[data-rec='{victim}']", timeout=10_000)
    assert status_of(demo, victim) == "open"
    assert page.locator(f"tr[data-rec='{victim}'] [data-dismiss]").is_visible()


def test_a_failed_request_keeps_the_page_says_what_failed_and_retries(
    tab: Tab, demo: RunningDemo
) -> None:
    """A proxy's HTML error page used to replace the page with "Unexpected token '<'"."""
    page = tab.open("/ui/idle")
    rows = page.locator("[data-table='idle'] tbody tr").count()
    html = "<html><body>502 Bad Gateway</body></html>"
    page.route(
        "**/v1/fleet/summary", lambda r: r.fulfill(status=502, body=html, content_type="text/html")
    )
    page.evaluate(
        "document.getElementById('lang').dispatchEvent(new Event('change'))"
    )  # redraw now
    alert = page.locator("#banner [role='alert']")
    alert.wait_for(timeout=10_000)
    text = alert.inner_text()
    assert "/v1/fleet/summary answered 502" in text and "HTML page, not JSON" in text, text
    assert "Retrying in 2 s" in text
    assert page.locator("[data-table='idle'] tbody tr").count() == rows  # the page stays
    page.unroute("**/v1/fleet/summary")
    page.locator("[data-retry='now']").click()
    alert.wait_for(state="detached", timeout=10_000)
    tab.errors.clear()  # the browser logs the refused request itself


def test_a_redraw_keeps_sort_search_and_scroll(tab: Tab, demo: RunningDemo) -> None:
    page = tab.open("/ui/idle")
    page.locator("[data-table='idle'] [data-sort='gpu']").click()  # by GPU, A to Z
    page.fill("[data-search='idle']", "gpu-node-0")
    page.wait_for_timeout(400)  # the search waits 200 ms for more typing
    before = page.locator("[data-table='idle'] tbody tr").evaluate_all(
        "rs => rs.map(r => r.dataset.uuid)"
    )
    page.evaluate("window.scrollTo(0, 300)")
    y = page.evaluate("window.scrollY")
    renders = int(page.evaluate("document.body.dataset.renders"))
    page.evaluate("document.getElementById('lang').dispatchEvent(new Event('change'))")
    page.wait_for_selector(f"body[data-renders='{renders + 1}']")
    after = page.locator("[data-table='idle'] tbody tr").evaluate_all(
        "rs => rs.map(r => r.dataset.uuid)"
    )
    assert after == before and before
    assert page.locator("[data-search='idle']").input_value() == "gpu-node-0"
    assert page.locator("th[aria-sort='ascending'] [data-sort='gpu']").count() == 1
    assert page.evaluate("window.scrollY") == y > 0


def test_an_unknown_console_path_is_the_consoles_page_not_found(
    browser: Any, demo: RunningDemo
) -> None:
    tab = Tab(browser, demo)
    page = tab.open("/ui/no-such-page")
    assert page.locator("[data-figure='not-found'] h1").inner_text() == "Page not found"
    assert page.locator("[data-nav='fleet']").is_visible()
    tab.close()
    assert [e for e in tab.errors if "404" not in e] == []


TICK_PX = """() => [...document.querySelectorAll(".chart-svg .tick")].map((t) =>
    parseFloat(getComputedStyle(t).fontSize) * t.ownerSVGElement.getScreenCTM().a)"""


@pytest.mark.parametrize("viewport", [(1280, 800), (390, 844)])
def test_chart_ticks_are_readable_and_a_hover_reads_the_values(
    browser: Any, demo: RunningDemo, viewport: tuple[int, int]
) -> None:
    """Tick labels were ~7 px on screen (an 11-unit font in a scaled-down picture)."""
    tab = Tab(browser, demo, viewport=viewport)
    key = next(g for g in api(demo, "/v1/fleet")["gpus"] if g["workloads"])["workloads"][0]["key"]
    page = tab.open("/ui/workload?" + str(httpx.QueryParams(key=key)))
    sizes = page.evaluate(TICK_PX)
    assert sizes and min(sizes) >= 10.9, sizes
    chart = page.locator("[data-chart='power'] svg")
    box = chart.bounding_box()
    assert box is not None
    chart.hover(position={"x": box["width"] * 0.8, "y": box["height"] / 2})
    readout = page.locator("[data-readout='power']")
    assert re.search(r"\d\d:\d\d · .+#\d+: \d+ W", readout.inner_text()), readout.inner_text()
    tab.close()
    assert tab.errors == []


def test_the_fleet_trend_follows_the_picked_window(tab: Tab, demo: RunningDemo) -> None:
    """KPIs and charts over the same window, from /v1/fleet/trend; 1 h to 7 days."""
    page = tab.open("/ui/")
    for name, seconds in (("24h", 86400), ("6h", 6 * 3600), ("7d", 7 * 86400)):
        if name != "24h":
            with page.expect_response(lambda r: "/v1/fleet/trend" in r.url):
                page.locator(f"[data-range='{name}']").click()
            page.wait_for_selector(f"[data-range='{name}'][aria-pressed='true']")
        now = api(demo, "/v1/fleet/summary")["now"]
        trend = api(demo, "/v1/fleet/trend", start=now - seconds, end=now)
        assert trend["hours"], "two hours of history"
        waste = sum(h["idle_cost"] for h in trend["hours"])
        assert shown(tab.figure("trend-waste"), waste, 2)
        active = sum(h["active_gpu_hours"] for h in trend["hours"])
        idle = sum(h["idle_gpu_hours"] for h in trend["hours"])
        assert shown(tab.figure("trend-utilisation"), 100 * active / (active + idle), 1)
        line = page.locator("[data-chart='trend-waste'] path.line")
        assert int(line.get_attribute("data-points") or 0) == len(trend["hours"])
    assert "range=7d" in page.url


GLYPHS = """ts => ts.map(t => [t.dataset.state, getComputedStyle(t, "::after").content,
    t.querySelector("[data-sm]").dataset.sm, t.getAttribute("href")])"""


def test_tiles_carry_a_glyph_per_state_an_activity_bar_and_unallocated_ones_open_the_idle_page(
    tab: Tab, demo: RunningDemo
) -> None:
    """Under deuteranopia "active" and "allocated idle" were two olive shades: each state
    has its own glyph as well; SM activity is a bar too (20 % looked like 97 %)."""
    page = tab.open("/ui/")
    fleet = {g["uuid"]: g for g in api(demo, "/v1/fleet")["gpus"]}
    tiles = page.locator(".tile")
    seen = dict(zip(tiles.evaluate_all("ts => ts.map(t => t.dataset.uuid)"),
                    tiles.evaluate_all(GLYPHS), strict=True))  # fmt: skip
    glyph_of: dict[str, set[str]] = {}
    for uuid, (state, glyph, bar, href) in seen.items():
        glyph_of.setdefault(state, set()).add(glyph)
        sm = fleet[uuid]["sm_activity"]
        assert int(bar) == (0 if sm is None else round(min(1.0, sm) * 100)), uuid
        if state == "unallocated":
            assert href == "/ui/idle?node=" + fleet[uuid]["node"]
    assert all(len(g) == 1 for g in glyph_of.values())  # one glyph per state
    assert len({next(iter(g)) for g in glyph_of.values()}) == len(glyph_of) >= 3
    now = api(demo, "/v1/fleet/summary")["now"]
    settled = lambda uuid: (fleet[uuid]["idle_since"] or now) <= now - 60  # noqa: E731
    free = next(u for u, (state, *_) in seen.items() if state == "unallocated" and settled(u))
    page.locator(f".tile[data-uuid='{free}']").click()
    page.wait_for_selector(f"[data-table='idle'] tr[data-uuid='{free}']")
    nodes = page.locator("[data-table='idle'] tbody tr td:first-child").all_inner_texts()
    assert nodes and {n.split(" #")[0] for n in nodes} == {fleet[free]["node"]}
