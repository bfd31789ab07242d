"""``GET /v1/savings?start=&end=`` (read scope): every release in the period and what it
freed up to the period's end (collector/savings_report.py), the body ``gpufleet report
--savings --format json`` prints for the same period. Without ``start``: the 7 days before
``end``."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from collector.config import CollectorSettings
from collector.http.auth import Gate, Scope, Token
from collector.http.query import QueryError, parse_window
from collector.http.responses import error_response, json_response
from collector.ledger.store import Ledger
from collector.savings_report import savings_report

WEEK_SECONDS = 7 * 86400.0


def savings_routes(
    ledger: Ledger,
    settings: CollectorSettings,
    currency: str,
    tokens: Gate | Collection[str | Token],
    clock: Callable[[], float] = time.time,
) -> list[BaseRoute]:
    """Routes to pass to ``create_app(..., extra_routes=...)``; ``tokens`` as there."""
    guard = Gate.of(tokens, settings.server).guard

    async def saved(request: Request) -> Response:
        params = dict(request.query_params)
        try:
            if "start" not in params:
                params["start"] = str(parse_window(params, clock())[1] - WEEK_SECONDS)
            start, end = parse_window(params, clock())
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        report = await run_in_threadpool(savings_report, ledger, start, end, currency)
        return json_response(report)

    return [Route("/v1/savings", guard(Scope.READ, saved), methods=["GET"])]
