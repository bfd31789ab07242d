"""The read views: built once per change and served with an ETag (304 on a match),
filtered and paged on the server; against the in-memory FakeBackend."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.config import CollectorSettings
from collector.http.app import create_app
from collector.http.pages import GpuFilter, PageRequest, decode_cursor, gpu_key, paginate
from collector.http.views import MAX_AGE_SECONDS, ViewCache
from collector.records import GpuState, GpuView, RecommendationKind, WorkloadRef
from tests.collector.http.test_app_fake import (
    NOW,
    AsgiClient,
    FakeBackend,
    make_batch,
    make_recommendation,
)

TOKEN = "read-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POD = WorkloadRef(key="pod:ml/a", kind="kubernetes_pod", name="a", namespace="ml", team="vision")
JOB = WorkloadRef(key="slurm:7", kind="slurm_job", name="7", namespace="hpc", team="physics")


def gpu(uuid: str, node: str, index: int, state: GpuState, *holders: WorkloadRef) -> GpuView:
    return GpuView(uuid=uuid, node=node, index=index, model="L4" if node == "n3" else "H100",
                   name="GPU", state=state, last_seen=NOW, workloads=holders)  # fmt: skip


@pytest.fixture
def backend() -> FakeBackend:
    views = [
        gpu("G-n1-0", "n1", 0, GpuState.ALLOCATED_IDLE, POD),
        gpu("G-n1-1", "n1", 1, GpuState.ACTIVE, JOB),
        gpu("G-n2-0", "n2", 0, GpuState.UNALLOCATED),
        gpu("G-n2-1", "n2", 1, GpuState.ACTIVE, POD),
        gpu("G-n3-0", "n3", 0, GpuState.UNKNOWN),
    ]
    recs = {
        "r1": make_recommendation("r1", RecommendationKind.RELEASE_IDLE, 900.0),
        "r2": make_recommendation("r2", RecommendationKind.SCALE_DOWN, 300.0),
        "r3": make_recommendation("r3", RecommendationKind.RELEASE_IDLE, 600.0),
    }
    return FakeBackend(views=views, recs=recs)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(backend: FakeBackend, clock: Clock) -> Iterator[AsgiClient]:
    yield AsgiClient(create_app(backend, CollectorSettings(), [TOKEN], clock=clock))


def uuids(body: dict[str, Any]) -> list[str]:
    return [g["uuid"] for g in body["gpus"]]


def test_the_fleet_is_read_once_and_answered_304_while_it_is_unchanged(
    client: AsgiClient, backend: FakeBackend
) -> None:
    first = client.get("/v1/fleet", headers=AUTH)
    second = client.get("/v1/fleet", headers=AUTH)
    assert first.content == second.content and backend.fleet_calls == 1
    tag = first.headers["etag"]
    assert second.headers["etag"] == tag
    same = client.get("/v1/fleet", headers={**AUTH, "If-None-Match": tag})
    assert (same.status_code, same.content, same.headers["etag"]) == (304, b"", tag)
    assert backend.fleet_calls == 1
    weak = client.get("/v1/fleet", headers={**AUTH, "If-None-Match": f'"x", W/{tag}'})
    assert weak.status_code == 304


def test_a_change_of_the_fleet_makes_a_new_answer_and_tag(
    client: AsgiClient, backend: FakeBackend
) -> None:
    first = client.get("/v1/fleet", headers=AUTH)
    backend.ingest(make_batch(node="n9", gpus=1), b"{}", NOW)  # moves the fleet's version
    after = client.get("/v1/fleet", headers={**AUTH, "If-None-Match": first.headers["etag"]})
    assert after.status_code == 200 and after.headers["etag"] != first.headers["etag"]
    assert uuids(after.json())[-1] == "GPU-n9-0" and backend.fleet_calls == 2


def test_an_answer_is_rebuilt_once_it_is_max_age_old_on_the_app_clock(
    client: AsgiClient, backend: FakeBackend, clock: Clock
) -> None:
    """States turn unknown with time alone: an unchanged fleet is read again after
    MAX_AGE_SECONDS (5 s, a tenth of the default staleness)."""
    first = client.get("/v1/fleet", headers=AUTH)
    clock.now += MAX_AGE_SECONDS / 2
    assert client.get("/v1/fleet", headers=AUTH).headers["etag"] == first.headers["etag"]
    clock.now += MAX_AGE_SECONDS / 2
    later = client.get("/v1/fleet", headers=AUTH)
    assert later.json()["now"] == NOW + MAX_AGE_SECONDS and backend.fleet_calls == 2


def test_filters_answer_the_matching_gpus_with_the_whole_fleets_summary(
    client: AsgiClient,
) -> None:
    cases = {
        "state=allocated_idle,unallocated": ["G-n1-0", "G-n2-0"],
        "node=n2": ["G-n2-0", "G-n2-1"],
        "namespace=ml": ["G-n1-0", "G-n2-1"],
        "team=physics": ["G-n1-1"],
        "model=L4": ["G-n3-0"],
        "node=n1,n2&state=active": ["G-n1-1", "G-n2-1"],
        "namespace=nobody": [],
    }
    for query, expected in cases.items():
        body = client.get(f"/v1/fleet?{query}", headers=AUTH).json()
        assert (uuids(body), body["total"], body["next_cursor"]) == (expected, len(expected), None)
        assert sum(body["summary"]["gpus_by_state"].values()) == 5, query


def test_pages_follow_each_other_by_cursor_to_the_last(client: AsgiClient) -> None:
    seen, cursor, totals = [], None, set()
    for _ in range(5):
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        body = client.get(f"/v1/fleet?{query}", headers=AUTH).json()
        seen.append(uuids(body))
        totals.add(body["total"])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == [["G-n1-0", "G-n1-1"], ["G-n2-0", "G-n2-1"], ["G-n3-0"]]
    assert totals == {5}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("cursor=not-a-cursor", "cursor"),
        ("cursor=WyJmbGVldCJd", "cursor"),  # ["fleet"]: no key
        ("state=sleeping", "state"),
        ("node=", "node"),
    ],
)
def test_bad_filters_and_pages_are_422_naming_the_parameter(
    client: AsgiClient, query: str, field: str
) -> None:
    response = client.get(f"/v1/fleet?{query}", headers=AUTH)
    assert (response.status_code, response.json()["field"]) == (422, field)


def test_a_cursor_of_another_view_is_refused(client: AsgiClient) -> None:
    rec_cursor = client.get("/v1/recommendations?limit=1", headers=AUTH).json()["next_cursor"]
    response = client.get(f"/v1/fleet?cursor={rec_cursor}", headers=AUTH)
    assert (response.status_code, response.json()["field"]) == (422, "cursor")


def test_recommendations_filter_page_and_tag(client: AsgiClient, backend: FakeBackend) -> None:
    kinds = client.get("/v1/recommendations?kind=release_idle", headers=AUTH).json()
    assert [r["id"] for r in kinds["recommendations"]] == ["r1", "r3"] and kinds["total"] == 2
    first = client.get("/v1/recommendations?limit=2", headers=AUTH).json()
    assert [r["id"] for r in first["recommendations"]] == ["r1", "r3"]
    rest = client.get(f"/v1/recommendations?limit=2&cursor={first['next_cursor']}", headers=AUTH)
    assert [r["id"] for r in rest.json()["recommendations"]] == ["r2"]
    assert rest.json()["next_cursor"] is None
    bad = client.get("/v1/recommendations?kind=nap", headers=AUTH)
    assert (bad.status_code, bad.json()["field"]) == (422, "kind")
    whole = client.get("/v1/recommendations", headers=AUTH)
    assert client.get("/v1/recommendations", headers=AUTH).content == whole.content
    assert len(backend.status_calls) == 4  # one ledger read per distinct view, not per request
    client.post("/v1/recommendations/r1/dismiss", headers=AUTH)  # moves the ledger's version
    after = client.get("/v1/recommendations", headers={"If-None-Match": whole.headers["etag"],
                                                        **AUTH})  # fmt: skip
    assert after.status_code == 200
    assert {r["id"] for r in after.json()["recommendations"]} == {"r2", "r3"}  # r1 dismissed


def test_a_dismissal_or_its_undo_shows_at_once_on_a_busy_collector(
    backend: FakeBackend, clock: Clock
) -> None:
    """A busy collector serves a view up to ``refresh_seconds`` old though its source moved;
    the console's redraw right after a dismissal read the list from before it (the row
    stayed, its Undo had nothing to undo on screen)."""
    views = ViewCache(clock, refresh_seconds=60.0)
    client = AsgiClient(create_app(backend, CollectorSettings(), [TOKEN], clock=clock, views=views))

    def ids() -> set[str]:
        answer = client.get("/v1/recommendations", headers=AUTH).json()
        return {r["id"] for r in answer["recommendations"]}

    assert ids() == {"r1", "r2", "r3"}
    client.post("/v1/recommendations/r1/dismiss", headers=AUTH)
    assert ids() == {"r2", "r3"}
    client.post("/v1/recommendations/r1/restore", headers=AUTH)
    assert ids() == {"r1", "r2", "r3"}


def views_of(nodes: list[int]) -> list[GpuView]:
    return [gpu(f"G-{n}-{i}", f"n{n}", i, GpuState.ACTIVE) for n in nodes for i in range(3)]


@given(
    nodes=st.lists(st.integers(0, 30), min_size=0, max_size=12),
    limit=st.integers(1, 7),
    wanted=st.frozensets(st.sampled_from([f"n{n}" for n in range(0, 31, 3)]), max_size=3),
)
def test_following_cursors_lists_every_matching_gpu_once_in_order(
    nodes: list[int], limit: int, wanted: frozenset[str]
) -> None:
    views = views_of(sorted(set(nodes)))
    chosen = GpuFilter(nodes=wanted)
    expected = sorted((v for v in views if not wanted or v.node in wanted), key=gpu_key)
    listed: list[GpuView] = []
    request = PageRequest(limit)
    for _ in range(len(views) + 1):
        page = paginate([v for v in views if chosen.matches(v)], gpu_key, "fleet", request)
        assert page.total == len(expected) and len(page.items) <= limit
        listed += page.items
        if page.next_cursor is None:
            break
        request = PageRequest(limit, decode_cursor(page.next_cursor, "fleet", (str, int, str)))
    assert listed == expected


def test_requests_that_miss_one_key_at_once_wait_for_one_build() -> None:
    cache = ViewCache(lambda: NOW)
    started, release, made = threading.Event(), threading.Event(), []

    def make() -> bytes:
        made.append(1)
        started.set()
        release.wait(5)
        return b"{}"

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(cache.build, "fleet", 1, make)
        assert started.wait(5)
        waiting = [pool.submit(cache.build, "fleet", 1, make) for _ in range(3)]
        release.set()
        entries = [first.result(5), *(w.result(5) for w in waiting)]
    assert len(made) == 1 and {e.tag for e in entries} == {entries[0].tag}
    assert cache.build("fleet", 2, make).tag != entries[0].tag  # a new source: built again
