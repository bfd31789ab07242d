"""The collector's HTTP API: an ASGI app (Starlette) over a CollectorBackend.

Routes: ``POST /v1/batches``, ``GET /v1/fleet``, ``GET /v1/workloads``,
``GET /v1/recommendations``, ``POST /v1/recommendations/{rec_id}/dismiss``,
``POST /v1/recommendations/{rec_id}/restore`` (undo a dismissal),
``GET /healthz``, ``GET /livez``, ``GET /readyz``, ``GET /metrics``, ``GET /openapi.json``,
``GET /docs``. ``/livez`` answers on the event loop without touching the core (a wedged
loop is the one thing it reports); ``/readyz`` answers whether the write path works,
``/healthz`` the detailed report (both 503 when it does not).

Every /v1 route needs ``Authorization: Bearer <token>`` with the route's scope
(collector/http/auth.py: ``agent`` to post batches, for the nodes the token is bound to;
``read`` to read; ``admin`` to dismiss) unless ``server.allow_anonymous``; the probes and
the docs are open, as probes expect, and /metrics too unless
``server.metrics_require_token`` (then the ``metrics`` scope). Errors are JSON
``{"error", "field", "reason"}``. Backend calls (SQLite I/O) run in worker threads; a
batch's body goes to the backend's ingest thread (``submit``), decoded and checked there;
past the in-flight bounds it is answered 429 with Retry-After first (``admission.py``).
Requests are logged without headers or query strings, so tokens never reach a log.

Mounted beside these through ``extra_routes`` (gpufleet/cli/collector.py): the console, plans,
``GET /v1/savings`` (collector/http/savings.py), and with ``answers`` configured the chat
callbacks ``POST /v1/answers/slack``, ``POST /v1/answers/feishu`` and the signed links' page
``/ui/answer`` (collector/http/answers.py), which are authenticated by signature, not token.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Collection, Sequence

from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from collector.backend import (
    CollectorBackend,
    IngestError,
    RejectReason,
    WorkloadsResponse,
)
from collector.config import CollectorSettings
from collector.health import ReadinessResponse
from collector.http.admission import Admission, Ticket
from collector.http.auth import AuthExporter, Gate, Scope, Token
from collector.http.openapi import docs_page, openapi_document
from collector.http.query import QueryError, parse_window
from collector.http.reads import ReadRoutes
from collector.http.responses import ENCODER, Handler, error_response, json_response
from collector.http.views import ViewCache
from collector.ingest.body import too_large
from collector.metrics.cache import Exposition
from collector.metrics.exporter import backend_exporters
from collector.metrics.fleet_families import PodLabelValues
from collector.metrics.replica_scope import MetricScope
from collector.usage_report import ledger_period

log = logging.getLogger(__name__)

#: a refusal's reason is logged at most this often (each refusal is counted)
REFUSAL_LOG_EVERY_SECONDS = 60.0
#: ``GET /livez``: the process serves
LIVE = {"live": True}


def create_app(
    backend: CollectorBackend,
    settings: CollectorSettings,
    tokens: Gate | Collection[str | Token],
    clock: Callable[[], float] = time.time,
    extra_routes: Sequence[BaseRoute] = (),
    collectors: Sequence[Collector] = (),
    views: ViewCache | None = None,
    exposition: Exposition | None = None,
    scope: MetricScope | None = None,
    pod_labels: PodLabelValues | None = None,
) -> Starlette:
    """The ASGI app. ``tokens``: the process's Gate (which the console and Alertmanager
    routes share), or tokens from collector.http.tokens.load_tokens (plain strings: bare
    tokens, of every scope); ``clock`` gives Unix seconds (tests pass a fixed one);
    ``extra_routes`` add pages (the web UI); ``collectors`` add their families to
    ``/metrics`` (the InfluxDB sink, the notifier); ``views``: the cache of encoded read views
    (collector/http/views.py), shared with the console's routes so the live fleet is read
    once per change for both; None: a cache of its own that rebuilds after every change;
    ``exposition`` keeps /metrics' body (pass one attached to the ledger's observers; the
    default is refreshed by age alone); ``scope``: a replica's share of the series
    (collector/metrics/replica_scope.py; None: one collector, every series);
    ``pod_labels``: the allowlisted pod labels gpufleet_workload_info carries
    (kubernetes.pod_labels, the enricher's)."""
    gate = Gate.of(tokens, settings.server)
    api = _Api(backend, settings, gate, clock)
    if exposition is None:
        exposition = Exposition(clock, settings.ingest.apply_interval_seconds)
    fleet_views = exposition.once_per_render(backend.fleet)  # shared with the rates, if asked
    exporters = backend_exporters(
        backend, clock, fleet_views, settings.kubernetes.metric_labels, scope, pod_labels
    )
    for collector in (*exporters, AuthExporter(gate), *collectors):
        exposition.register(collector)
    exposition.register(api.admission)
    guard = gate.guard
    cache = views or ViewCache(clock)
    reads = ReadRoutes(backend, clock, cache)
    api.after_action = lambda: cache.forget("recommendations")  # shown at the next read
    metrics = _metrics_endpoint(exposition)
    if settings.server.metrics_require_token:
        metrics = guard(Scope.METRICS, metrics)
    batches = guard(Scope.AGENT, api.post_batch, api.unauthorized)
    dismiss = guard(Scope.ADMIN, api.dismiss)
    restore = guard(Scope.ADMIN, api.restore)
    openapi, docs = _document_endpoints()
    routes: list[BaseRoute] = [
        Route("/v1/batches", batches, methods=["POST"]),
        Route("/v1/fleet", guard(Scope.READ, reads.fleet), methods=["GET"]),
        Route("/v1/workloads", guard(Scope.READ, api.get_workloads), methods=["GET"]),
        Route("/v1/recommendations", guard(Scope.READ, reads.recommendations), methods=["GET"]),
        # :path, because an id may hold a slash ("release_idle:pod:ml/notebook-7")
        Route("/v1/recommendations/{rec_id:path}/dismiss", dismiss, methods=["POST"]),
        Route("/v1/recommendations/{rec_id:path}/restore", restore, methods=["POST"]),
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/livez", _livez, methods=["GET"]),
        Route("/readyz", api.readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        *extra_routes,
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(AccessLog)],
        exception_handlers={HTTPException: _http_error, Exception: _http_error},
    )


class _Api:
    """The route handlers, sharing the backend, settings, auth and clock."""

    def __init__(
        self,
        backend: CollectorBackend,
        settings: CollectorSettings,
        gate: Gate,
        clock: Callable[[], float],
    ) -> None:
        self.backend = backend
        self.settings = settings
        self.gate = gate
        self.clock = clock
        self.admission = Admission(settings.server)
        #: called after a dismissal or its undo (create_app: forget the cached lists)
        self.after_action: Callable[[], None] = lambda: None
        #: whether the last batch the core was to store failed (its ERROR is logged once)
        self.store_failing = False
        #: reason -> when a refusal for it was last logged (monotonic seconds)
        self._refusal_logged: dict[RejectReason, float] = {}

    async def unauthorized(self) -> None:
        """A batch the gate refused (401, 403 scope, 429) counts as refused, unauthorized."""
        await self.count_rejection(RejectReason.UNAUTHORIZED, 0)

    async def count_rejection(self, reason: RejectReason, samples: int) -> None:
        try:
            await run_in_threadpool(self.backend.record_rejection, reason, samples)
        except Exception:  # a counter must not turn a 4xx into a 500
            log.exception("counting a refused batch failed")

    def log_refusal(self, err: IngestError) -> None:
        """One line per reason a minute: agents retry what they can fix (a clock, a
        version) every few seconds, and every refusal is counted by reason anyway. Load
        shed at the door (``overloaded``) is the collector's own state: a WARNING."""
        now = time.monotonic()
        if now - self._refusal_logged.get(err.reason, -math.inf) < REFUSAL_LOG_EVERY_SECONDS:
            return
        self._refusal_logged[err.reason] = now
        level = logging.WARNING if err.reason is RejectReason.OVERLOADED else logging.INFO
        log.log(
            level,
            "batch refused (%s %s): %s (counted in gpufleet_collector_rejected_batches_total; "
            "this reason is logged at most once a minute)",
            err.status,
            err.reason,
            err.message,
        )

    async def post_batch(self, request: Request) -> Response:
        admission, ticket = self.admission, Ticket()
        try:
            limit = self.settings.server.max_body_bytes
            ticket = admission.admit(_declared_bytes(request, limit))  # 429 before reading
            body = await _read_body(request, limit, lambda read: admission.grow(ticket, read))
            # decoded, validated and stored off the event loop (CollectorService.submit); kept
            # pending as sent: a gzipped body is ~10x less for the ledger to write
            coding = request.headers.get("content-encoding")
            nodes = request.state.token.binding()  # the agent token's nodes (node_binding.py)
            future = self.backend.submit(body, coding, self.clock(), nodes=nodes)
            admission.queue(ticket, future)
            ack = await asyncio.wrap_future(future)
        except IngestError as err:
            await self.count_rejection(err.reason, err.samples)
            self.log_refusal(err)
            response = error_response(err.status, err.message, err.field, err.reason.value)
            if err.retry_after_seconds is not None:
                response.headers["Retry-After"] = str(err.retry_after_seconds)
            return response
        except Exception:  # the core failed: nothing was acknowledged, the agent retries
            if not self.store_failing:  # once per streak: agents retry every few seconds
                self.store_failing = True
                log.exception(
                    "storing a batch failed; batches are answered 503 (agents keep them) "
                    "until one is stored again: see /readyz (logged once)"
                )
            return error_response(503, "the collector could not store the batch; retry later")
        finally:
            admission.release(ticket)  # what was not handed to the ingest thread
        if self.store_failing:
            self.store_failing = False
            log.warning("batches are stored again")
        return json_response(ack)

    async def get_workloads(self, request: Request) -> Response:
        try:
            start, end = parse_window(request.query_params, self.clock())
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        reports = await run_in_threadpool(self.backend.workloads, start, end)
        covered = ledger_period(start, end, self.clock())
        return json_response(WorkloadsResponse(start, end, reports, covered.start, covered.end))

    async def dismiss(self, request: Request) -> Response:
        rec_id = request.path_params["rec_id"]
        rec = await run_in_threadpool(self.backend.dismiss, rec_id, self.clock())
        self.after_action()
        if rec is None:
            return error_response(404, f"no recommendation with id {rec_id!r}", "rec_id")
        return json_response(rec)

    async def restore(self, request: Request) -> Response:
        rec_id = request.path_params["rec_id"]
        rec = await run_in_threadpool(self.backend.restore, rec_id, self.clock())
        self.after_action()
        if rec is None:
            return error_response(404, f"no recommendation with id {rec_id!r}", "rec_id")
        return json_response(rec)

    async def healthz(self, request: Request) -> Response:
        try:
            report = await run_in_threadpool(self.backend.health)
        except Exception as err:
            log.exception("health check failed")
            return error_response(503, f"health check failed: {type(err).__name__}")
        return json_response(report, 200 if report.ledger_ok else 503)

    async def readyz(self, request: Request) -> Response:
        try:
            report = await run_in_threadpool(self.backend.health)
        except Exception as err:
            log.exception("readiness check failed")
            return error_response(503, f"readiness check failed: {type(err).__name__}")
        ready = ReadinessResponse(report.ready, report.problems)
        return json_response(ready, 200 if report.ready else 503)


async def _livez(request: Request) -> Response:
    return json_response(LIVE)


def _declared_bytes(request: Request, max_bytes: int) -> int:
    """The body's Content-Length (0 when chunked), refused by content type (415) or
    declared size (413) before anything is read."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise IngestError(
            415,
            f"Content-Type must be application/json, got {media_type or 'none'!r}",
            reason=RejectReason.UNSUPPORTED_MEDIA_TYPE,
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large(max_bytes, decompressed=False)
    return int(declared) if declared.isdigit() else 0


async def _read_body(request: Request, max_bytes: int, reading: Callable[[int], None]) -> bytes:
    """The raw body, refused by size while reading (413); ``reading`` is told the bytes read
    so far after each chunk (admission control may refuse it)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise too_large(max_bytes, decompressed=False)
        reading(len(body))
    return bytes(body)


def _metrics_endpoint(exposition: Exposition) -> Handler:
    async def metrics(request: Request) -> Response:
        accept, encodings = (request.headers.get(h, "") for h in ("accept", "accept-encoding"))
        scrape = await run_in_threadpool(exposition.scrape, accept, encodings)
        headers = {"Content-Type": scrape.content_type, "Vary": "Accept, Accept-Encoding"}
        if scrape.encoding is not None:
            headers["Content-Encoding"] = scrape.encoding
        return Response(scrape.body, headers=headers)

    return metrics


def _document_endpoints() -> tuple[Handler, Handler]:
    document = openapi_document()
    encoded, page = ENCODER.encode(document), docs_page(document)

    async def openapi(request: Request) -> Response:
        return Response(encoded, media_type="application/json")

    async def docs(request: Request) -> Response:
        return HTMLResponse(page)

    return openapi, docs


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    response = error_response(status, str(detail))
    if isinstance(exc, HTTPException) and exc.headers:  # 405's Allow, among others
        response.headers.update(exc.headers)
    return response


class AccessLog:
    """Logs method, path, status and duration of each request; never headers or queries.

    A request answered 2xx or 3xx is logged at DEBUG (every agent posts every few seconds:
    thousands of lines a minute in a large fleet), and so is a 429; 4xx and 5xx at INFO."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            # 429 is the collector's own state (log_refusal logs it), not the request's fault
            level = logging.DEBUG if status[0] < 400 or status[0] == 429 else logging.INFO
            if log.isEnabledFor(level):
                elapsed_ms = (time.perf_counter() - started) * 1000
                log.log(
                    level, "%s %s %d %.1f ms", scope["method"], scope["path"], status[0], elapsed_ms
                )
