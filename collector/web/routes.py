"""The console's routes: its pages, their static files, and two read-only API routes.

Pages are static shells (no figures, no secrets); the browser fetches the same /v1 API a
script would, with the token the user typed in (kept in sessionStorage), and draws tables
and SVG charts itself from files shipped in this package. No page loads anything from
another origin: the Content-Security-Policy says ``'self'`` only.

API routes added here, behind the same bearer auth as the rest of /v1 (the ``read``
scope; dismissing from the console needs ``admin`` as well):

- ``GET /v1/gpus/usage?start=&end=``: every GPU in the fleet now with its hourly price and
  its usage (idle seconds, idle cost, energy, carbon) summed over the hourly rollups of the
  hours [start, end) touches (``usage_report.ledger_period``, the rule of /v1/workloads).
- ``GET /v1/gpus/{uuid}/series?start=&end=``: recent per-minute buckets of one GPU
  (activity, power, memory) from the in-memory SeriesBuffer; 404 for a GPU never seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from importlib import resources
from typing import Protocol

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from collector.backend import CollectorBackend
from collector.config import CollectorSettings
from collector.http.auth import Gate, Scope, Token
from collector.http.query import QueryError, parse_window
from collector.http.responses import Handler, error_response, json_response
from collector.ledger.records import GpuRecord
from collector.records import Usage
from collector.usage_report import ledger_period
from collector.web.series import SeriesBuffer, SeriesPoint

PAGES = {"": "fleet", "idle": "idle", "recommendations": "recommendations",
         "workload": "workload", "energy": "energy", "plans": "plans"}  # fmt: skip
STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class GpuUsageSource(Protocol):
    def usage_by_gpu(self, start: float, end: float) -> list[tuple[GpuRecord, Usage]]: ...


class PriceSource(Protocol):
    def price_per_gpu_hour(self, model: str, node: str = "", plan: str = "on_demand") -> float: ...


@dataclass(frozen=True)
class ConsoleSources:
    """What the console reads beyond the CollectorBackend (the ledger and the price book)."""

    backend: CollectorBackend
    usage: GpuUsageSource
    prices: PriceSource
    currency: str
    series: SeriesBuffer


class GpuUsage(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    node: str
    index: int
    model: str
    #: on-demand price of one GPU-hour in ``currency``; what an idle hour of it wastes
    price_per_hour: float
    usage: Usage


class GpuUsageResponse(msgspec.Struct, frozen=True, kw_only=True):
    start: float
    end: float
    currency: str
    gpus: list[GpuUsage]


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
) -> list[BaseRoute]:
    """Routes to pass to ``create_app(..., extra_routes=...)``; ``tokens`` as there."""
    guard = Gate.of(tokens, settings.server).guard
    api = _ConsoleApi(sources, clock)
    shell = _read("console.html").replace(
        "__ANONYMOUS__", "true" if settings.server.allow_anonymous else "false"
    )
    routes: list[BaseRoute] = [
        Route("/", _redirect_home, methods=["GET"]),
        Route("/ui/static/{name}", _static, methods=["GET"]),
        Route("/v1/gpus/usage", guard(Scope.READ, api.gpu_usage), methods=["GET"]),
        Route("/v1/gpus/{uuid}/series", guard(Scope.READ, api.series), methods=["GET"]),
    ]
    for path, page in PAGES.items():
        routes.append(Route(f"/ui/{path}", _page(shell.replace("__PAGE__", page)), methods=["GET"]))
    return routes


def _read(name: str) -> str:
    return resources.files("collector.web").joinpath("static", name).read_text(encoding="utf-8")


def _page(html: str) -> Handler:
    async def page(request: Request) -> Response:
        return HTMLResponse(html, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})

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

    async def gpu_usage(self, request: Request) -> Response:
        try:
            start, end = parse_window(request.query_params, self.clock())
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        gpus = await run_in_threadpool(self._gpu_usage, start, end)
        currency = self.sources.currency
        return json_response(GpuUsageResponse(start=start, end=end, currency=currency, gpus=gpus))

    def _gpu_usage(self, start: float, end: float) -> list[GpuUsage]:
        period = ledger_period(start, end, self.clock())
        rows = self.sources.usage.usage_by_gpu(period.start, period.end)
        used = {record.uuid: usage for record, usage in rows}
        prices = self.sources.prices
        return [
            GpuUsage(
                uuid=v.uuid,
                node=v.node,
                index=v.index,
                model=v.model,
                price_per_hour=prices.price_per_gpu_hour(v.model, v.node) * v.price_fraction,
                usage=used.get(v.uuid, Usage()),
            )
            for v in self.sources.backend.fleet(self.clock())
        ]

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
