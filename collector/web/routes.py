"""The console's routes: its pages, their static files, and two read-only API routes.

Pages are static shells (no figures, no secrets); the browser fetches the same /v1 API a
script would, with the token the user typed in (kept in sessionStorage), and draws tables
and SVG charts itself from files shipped in this package. No page loads anything from
another origin: the Content-Security-Policy says ``'self'`` only.

API routes added here, behind the same bearer auth as the rest of /v1 (the ``read``
scope; dismissing from the console needs ``admin`` as well). Any other ``/ui/`` path
answers the console's shell with its "page not found", status 404.

- ``GET /v1/fleet/summary`` and ``GET /v1/gpus/usage``: collector/web/fleet_api.py.
- ``GET /v1/fleet/trend?start=&end=``: the fleet per hour (utilisation, waste, cost,
  energy) from the ledger's hourly rollups: collector/web/trend_api.py.
- ``GET /v1/gpus/{uuid}/series?start=&end=``: recent per-minute buckets of one GPU
  (activity, power, memory) from the in-memory SeriesBuffer; 404 for a GPU never seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from importlib import resources

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from collector.backend import CollectorBackend
from collector.config import CollectorSettings
from collector.http.auth import Gate, Scope, Token
from collector.http.query import QueryError, parse_window
from collector.http.responses import Handler, error_response, json_response
from collector.http.views import ViewCache
from collector.web.fleet_api import FleetApi, GpuUsageSource, PriceSource
from collector.web.series import SeriesBuffer, SeriesPoint
from collector.web.trend_api import TrendApi

PAGES = {"": "fleet", "idle": "idle", "recommendations": "recommendations",
         "workload": "workload", "energy": "energy", "plans": "plans",
         "savings": "savings"}  # fmt: skip
STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class ConsoleSources:
    """What the console reads beyond the CollectorBackend (the ledger and the price book)."""

    backend: CollectorBackend
    #: the ledger: per-GPU and per-hour rollups
    usage: GpuUsageSource
    prices: PriceSource
    currency: str
    series: SeriesBuffer


class SeriesResponse(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    start: float
    end: float
    resolution_seconds: float
    points: list[SeriesPoint]


def console_routes(
    sources: ConsoleSources,
    settings: CollectorSettings,
    tokens: Gate | Collection[str | Token],
    clock: Callable[[], float] = time.time,
    views: ViewCache | None = None,
) -> list[BaseRoute]:
    """Routes to pass to ``create_app(..., extra_routes=...)``; ``tokens``, ``clock`` and
    ``views`` as there."""
    guard = Gate.of(tokens, settings.server).guard
    api = _ConsoleApi(sources, clock)
    cache = views or ViewCache(clock)
    reads = FleetApi(sources.backend, sources.usage, sources.prices, sources.currency, clock, cache)
    trend = TrendApi(sources.backend, sources.usage, sources.currency, clock, cache)
    shell = _read("console.html").replace(
        "__ANONYMOUS__", "true" if settings.server.allow_anonymous else "false"
    )
    routes: list[BaseRoute] = [
        Route("/", _redirect_home, methods=["GET"]),
        Route("/ui/static/{name}", _static, methods=["GET"]),
        Route("/v1/fleet/summary", guard(Scope.READ, reads.summary), methods=["GET"]),
        Route("/v1/gpus/usage", guard(Scope.READ, reads.gpu_usage), methods=["GET"]),
        Route("/v1/gpus/{uuid}/series", guard(Scope.READ, api.series), methods=["GET"]),
        Route("/v1/fleet/trend", guard(Scope.READ, trend.trend), methods=["GET"]),
    ]
    for path, page in PAGES.items():
        routes.append(Route(f"/ui/{path}", _page(shell.replace("__PAGE__", page)), methods=["GET"]))
    # any other /ui/ path: the console's own "page not found" (404), not the API's JSON
    missing = _page(shell.replace("__PAGE__", "notfound"), status_code=404)
    routes.append(Route("/ui/{rest:path}", missing, methods=["GET"]))
    return routes


def _read(name: str) -> str:
    return resources.files("collector.web").joinpath("static", name).read_text(encoding="utf-8")


def _page(html: str, status_code: int = 200) -> Handler:
    async def page(request: Request) -> Response:
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-store"}
        return HTMLResponse(html, status_code=status_code, headers=headers)

    return page


async def _redirect_home(request: Request) -> Response:
    return RedirectResponse("/ui/", status_code=307)


async def _static(request: Request) -> Response:
    name = request.path_params["name"]
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix not in STATIC_TYPES or "/" in name or name.startswith("."):
        return error_response(404, f"no static file {name!r}")
    try:
        body = _read(name)
    except (FileNotFoundError, IsADirectoryError):
        return error_response(404, f"no static file {name!r}")
    return Response(body, media_type=STATIC_TYPES[suffix], headers=SECURITY_HEADERS)


class _ConsoleApi:
    def __init__(self, sources: ConsoleSources, clock: Callable[[], float]) -> None:
        self.sources = sources
        self.clock = clock

    async def series(self, request: Request) -> Response:
        uuid = request.path_params["uuid"]
        series = self.sources.series
        try:
            params = dict(request.query_params)
            if "start" not in params:
                end = parse_window(params, self.clock())[1]
                params["start"] = str(end - series.retention_seconds)
            start, end = parse_window(params, self.clock())
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        points = series.points(uuid, start, end)
        if points is None:
            return error_response(404, f"no recent samples of GPU {uuid!r}", "uuid")
        resolution = series.resolution_seconds
        return json_response(
            SeriesResponse(
                uuid=uuid, start=start, end=end, resolution_seconds=resolution, points=points
            )
        )
