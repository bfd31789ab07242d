"""``GET /v1/fleet/trend?start=&end=``: the fleet hour by hour from the ledger's hourly
rollups (the console's trend chart): per hour the share of known GPU time that was
active, the idle cost (waste), the cost and the energy. Hours without rows are absent
(the collector was not running, or the ledger's retention dropped them). Encoded once per
ledger version and window (collector/http/views.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response

from collector.backend import CollectorBackend
from collector.http.query import QueryError, parse_window
from collector.http.responses import ENCODER, error_response
from collector.http.views import ViewCache, cached_response
from collector.read_answers import TrendResponse, trend_hour
from collector.records import HOUR_SECONDS, Usage


class HourlyUsageSource(Protocol):
    def usage_by_hour(self, start: float, end: float) -> list[tuple[float, Usage]]: ...


class TrendApi:
    def __init__(
        self,
        backend: CollectorBackend,
        usage: HourlyUsageSource,
        currency: str,
        clock: Callable[[], float],
        cache: ViewCache,
    ) -> None:
        self.backend, self.usage, self.currency = backend, usage, currency
        self.clock, self.cache = clock, cache

    async def trend(self, request: Request) -> Response:
        try:
            start, end = parse_window(request.query_params, self.clock())
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        first = math.floor(start / HOUR_SECONDS) * HOUR_SECONDS

        def build() -> bytes:
            rows = self.usage.usage_by_hour(first, end)
            hours = [trend_hour(hour, usage) for hour, usage in rows]
            answer = TrendResponse(start=start, end=end, currency=self.currency, hours=hours)
            return ENCODER.encode(answer)

        version = self.backend.read_version().ledger
        entry = await self.cache.get(("fleet/trend", first, end), version, build)
        return cached_response(request, entry)
