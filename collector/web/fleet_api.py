"""``GET /v1/fleet/summary`` and ``GET /v1/gpus/usage``: the console's reads, which need the
price book and the ledger beyond the CollectorBackend; encoded once per change with an
ETag (collector/http/views.py).

- ``/v1/fleet/summary``: the fleet's summary and one line per node (GPUs by state, waste
  per hour, models, health), nodes by waste; no per-GPU list (collector/read_answers.py).
- ``/v1/gpus/usage?start=&end=``: every GPU in the fleet now with its hourly price and its
  usage (idle seconds, idle cost, energy, carbon) summed over the hourly rollups of the
  hours [start, end) touches (``usage_report.ledger_period``, the rule of /v1/workloads);
  with ``state``, ``node``, ``namespace``, ``team``, ``model``, ``workload``, ``limit``
  or ``cursor`` the matching page, with ``total``, ``next_cursor`` (the order of
  /v1/fleet) and ``usage`` summed over every matching GPU (the console's totals).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response

from collector.backend import CollectorBackend
from collector.http.pages import gpu_key, paginate
from collector.http.query import (
    GPU_FILTERS,
    QueryError,
    asks_for_page,
    parse_gpu_filter,
    parse_page,
    parse_window,
)
from collector.http.reads import GPU_CURSOR, FleetSnapshot, FleetSnapshots
from collector.http.responses import ENCODER, error_response
from collector.http.views import ViewCache, cached_response
from collector.ledger.records import GpuRecord
from collector.read_answers import (
    GpuUsage,
    GpuUsagePageResponse,
    GpuUsageResponse,
    summarise_by_node,
)
from collector.records import HOUR_SECONDS, GpuView, Usage
from collector.usage_report import ledger_period


class GpuUsageSource(Protocol):
    def usage_by_gpu(self, start: float, end: float) -> list[tuple[GpuRecord, Usage]]: ...

    #: the fleet per hour (collector/web/trend_api.py)
    def usage_by_hour(self, start: float, end: float) -> list[tuple[float, Usage]]: ...


class PriceSource(Protocol):
    def price_per_gpu_hour(self, model: str, node: str = "", plan: str = "on_demand") -> float: ...


class FleetApi:
    """The two routes' handlers over one cache."""

    def __init__(
        self,
        backend: CollectorBackend,
        usage: GpuUsageSource,
        prices: PriceSource,
        currency: str,
        clock: Callable[[], float],
        cache: ViewCache,
    ) -> None:
        self.backend, self.usage, self.prices, self.currency = backend, usage, prices, currency
        self.clock, self.cache = clock, cache
        self.snapshots = FleetSnapshots(backend, clock, cache)

    def price_of(self, view: GpuView) -> float:
        """One GPU-hour of ``view``: its share of its model's on-demand price on its node."""
        return self.prices.price_per_gpu_hour(view.model, view.node) * view.price_fraction

    async def summary(self, request: Request) -> Response:
        snapshot = await self.snapshots.current()
        snap: FleetSnapshot = snapshot.value

        def build() -> bytes:
            by_node = summarise_by_node(
                snap.now, snap.views, snap.duplicates, self.price_of, self.currency
            )
            return ENCODER.encode(by_node)

        entry = await self.cache.get(("fleet/summary",), snapshot.generation, build)
        return cached_response(request, entry)

    async def gpu_usage(self, request: Request) -> Response:
        params = request.query_params
        try:
            start, end = parse_window(params, self.clock())
            paged = asks_for_page(params, GPU_FILTERS)
            chosen = parse_gpu_filter(params)
            page = parse_page(params, "gpus/usage", GPU_CURSOR)
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        period = ledger_period(start, end, self.clock())
        # the rows of hours [start, end): the same for any end within one hour, so a window
        # ending "now" reads the ledger once per commit, not once per request
        first, last = period.start, math.ceil(period.end / HOUR_SECONDS) * HOUR_SECONDS
        rows = await self.cache.get(
            ("usage-rows", first, last),
            self.backend.read_version().ledger,
            lambda: {r.uuid: u for r, u in self.usage.usage_by_gpu(first, last)},
            max_age_seconds=math.inf,  # ledger rows change with the ledger only
        )
        snapshot = await self.snapshots.current()
        snap: FleetSnapshot = snapshot.value
        used: dict[str, Usage] = rows.value

        def build() -> bytes:
            views = snap.views
            if not paged:
                gpus = [self._gpu(v, used) for v in views]
                whole = GpuUsageResponse(start=start, end=end, currency=self.currency, gpus=gpus)
                return ENCODER.encode(whole)
            matching = [v for v in views if chosen.matches(v)]
            found = paginate(matching, gpu_key, "gpus/usage", page)
            summed = Usage()
            for view in matching:
                if (row := used.get(view.uuid)) is not None:
                    summed.add(row)
            return ENCODER.encode(
                GpuUsagePageResponse(
                    start=start, end=end, currency=self.currency,
                    gpus=[self._gpu(v, used) for v in found.items],
                    total=found.total, next_cursor=found.next_cursor, usage=summed,
                )
            )  # fmt: skip

        key = ("gpus/usage", start, end, chosen, page, paged)
        source = (snapshot.generation, rows.generation)
        return cached_response(request, await self.cache.get(key, source, build))

    def _gpu(self, view: GpuView, used: dict[str, Usage]) -> GpuUsage:
        return GpuUsage(
            uuid=view.uuid,
            node=view.node,
            index=view.index,
            model=view.model,
            price_per_hour=self.price_of(view),
            usage=used.get(view.uuid, Usage()),
        )
