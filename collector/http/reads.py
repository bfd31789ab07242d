"""``GET /v1/fleet`` and ``GET /v1/recommendations``, encoded once per change.

The live fleet is read once per change (``FleetSnapshots``: every GPU's view, the
duplicate claims and the summary at one ``now``); the whole-fleet answer and each
filtered page are encoded from that snapshot once and served with an ETag until it
changes (collector/http/views.py). Recommendations are read from the ledger once per
ledger change and status list. Without a filter, ``limit`` or ``cursor`` both answer as
they always did; with any, the matching page with ``total`` and ``next_cursor``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from collector.backend import (
    CollectorBackend,
    FleetPageResponse,
    FleetResponse,
    FleetSummary,
    RecommendationsPageResponse,
    RecommendationsResponse,
    summarise_fleet,
)
from collector.http.pages import gpu_key, paginate, recommendation_key
from collector.http.query import (
    GPU_FILTERS,
    RECOMMENDATION_FILTERS,
    QueryError,
    asks_for_page,
    parse_gpu_filter,
    parse_page,
    parse_recommendation_filter,
    parse_statuses,
)
from collector.http.responses import ENCODER, error_response
from collector.http.views import Entry, ViewCache, cached_response
from collector.records import DuplicateGpu, GpuView, Recommendation

#: a fleet cursor's key: node, index, uuid
GPU_CURSOR = (str, int, str)
#: a recommendation cursor's key: -money per month, id
RECOMMENDATION_CURSOR = (float, str)


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    now: float
    views: list[GpuView]
    duplicates: list[DuplicateGpu]
    summary: FleetSummary

    def teams(self) -> dict[str, str]:
        """Workload key -> team, for the workloads holding a GPU now."""
        return {ref.key: ref.team for view in self.views for ref in view.workloads}


class FleetSnapshots:
    """The live fleet read once per change of ``backend.read_version().fleet``."""

    def __init__(self, backend: CollectorBackend, clock: Callable[[], float], cache: ViewCache):
        self.backend, self.clock, self.cache = backend, clock, cache

    async def current(self) -> Entry:
        version = self.backend.read_version().fleet
        return await self.cache.get(("fleet-snapshot",), version, self._read)

    def _read(self) -> FleetSnapshot:
        now = self.clock()
        views = self.backend.fleet(now)
        return FleetSnapshot(now, views, self.backend.duplicate_gpus(), summarise_fleet(views))


class ReadRoutes:
    """The handlers; ``cache`` holds their encoded answers."""

    def __init__(self, backend: CollectorBackend, clock: Callable[[], float], cache: ViewCache):
        self.backend, self.cache = backend, cache
        self.snapshots = FleetSnapshots(backend, clock, cache)

    async def fleet(self, request: Request) -> Response:
        params = request.query_params
        try:
            paged = asks_for_page(params, GPU_FILTERS)
            chosen = parse_gpu_filter(params)
            page = parse_page(params, "fleet", GPU_CURSOR)
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        snapshot = await self.snapshots.current()
        snap: FleetSnapshot = snapshot.value
        if not paged:
            whole = FleetResponse(snap.now, snap.summary, snap.views, snap.duplicates)
            entry = await self.cache.get(("fleet",), snapshot.generation, lambda: _encode(whole))
            return cached_response(request, entry)

        def build() -> bytes:
            matching = [v for v in snap.views if chosen.matches(v)]
            found = paginate(matching, gpu_key, "fleet", page)
            items, total, cursor = found.items, found.total, found.next_cursor
            return _encode(
                FleetPageResponse(snap.now, snap.summary, items, snap.duplicates, total, cursor)
            )

        key = ("fleet", chosen, page)
        return cached_response(request, await self.cache.get(key, snapshot.generation, build))

    async def recommendations(self, request: Request) -> Response:
        params = request.query_params
        try:
            statuses = parse_statuses(params.get("status"))
            paged = asks_for_page(params, RECOMMENDATION_FILTERS)
            chosen = parse_recommendation_filter(params)
            page = parse_page(params, "recommendations", RECOMMENDATION_CURSOR)
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        names = [s.value for s in statuses]
        ledger = self.backend.read_version().ledger
        if not paged:

            def whole() -> bytes:
                recs = self.backend.recommendations(statuses)
                return _encode(RecommendationsResponse(names, recs))

            entry = await self.cache.get(("recommendations", statuses), ledger, whole)
            return cached_response(request, entry)
        snapshot = await self.snapshots.current() if chosen.teams else None

        def build() -> bytes:
            teams = snapshot.value.teams() if snapshot else {}
            team_of = lambda key: teams.get(key, "")  # noqa: E731
            recs = self.backend.recommendations(statuses)
            matching: list[Recommendation] = [r for r in recs if chosen.matches(r, team_of)]
            found = paginate(matching, recommendation_key, "recommendations", page)
            return _encode(
                RecommendationsPageResponse(names, found.items, found.total, found.next_cursor)
            )

        source = (ledger, snapshot.generation if snapshot else None)
        key = ("recommendations", statuses, chosen, page)
        return cached_response(request, await self.cache.get(key, source, build))


def _encode(value: object) -> bytes:
    return ENCODER.encode(value)
