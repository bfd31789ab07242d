"""``GET /v1/plans?start=&end=`` (read scope) and the plans' /metrics exporter: the
what-if costs of plans and the utilisation gap over a period (collector/plans_report.py),
the body ``gpufleet report --plans --format json`` prints for the same period. Without
``start`` the period is the pricing look-back (``analysis.pricing_lookback_seconds``, 30
days) before ``end``."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings
from collector.http.auth import Gate, Scope, Token
from collector.http.query import QueryError, parse_window
from collector.http.responses import error_response, json_response
from collector.ledger.store import Ledger
from collector.metrics.plans import PlansExporter
from collector.plans_report import PlansReport, plans_report
from collector.usage_report import ledger_period


def plans_routes(
    ledger: Ledger,
    prices: PriceBook,
    settings: CollectorSettings,
    tokens: Gate | Collection[str | Token],
    clock: Callable[[], float] = time.time,
) -> list[BaseRoute]:
    """Routes to pass to ``create_app(..., extra_routes=...)``; ``tokens`` as there."""
    guard = Gate.of(tokens, settings.server).guard
    analysis = settings.analysis
    report = _reporter(ledger, prices, settings, clock)

    async def plans(request: Request) -> Response:
        params = dict(request.query_params)
        try:
            if "start" not in params:
                end = parse_window(params, clock())[1]
                params["start"] = str(end - analysis.pricing_lookback_seconds)
            start, end = parse_window(params, clock())
        except QueryError as err:
            return error_response(422, str(err), err.field, "bad_query")
        return json_response(await run_in_threadpool(report, start, end))

    return [Route("/v1/plans", guard(Scope.READ, plans), methods=["GET"])]


def plans_exporter(
    ledger: Ledger, prices: PriceBook, settings: CollectorSettings, clock: Callable[[], float]
) -> PlansExporter:
    """The /metrics side of the same report, over the pricing look-back."""
    analysis = settings.analysis
    report = _reporter(ledger, prices, settings, clock)
    return PlansExporter(
        report, analysis.pricing_lookback_seconds, analysis.utilisation_target, clock
    )


def _reporter(
    ledger: Ledger, prices: PriceBook, settings: CollectorSettings, clock: Callable[[], float]
) -> Callable[[float, float], PlansReport]:
    analysis = settings.analysis

    def report(start: float, end: float) -> PlansReport:
        period = ledger_period(start, end, clock())
        return plans_report(ledger, period, prices,
                            max_term_months=analysis.pricing_max_term_months,
                            utilisation_target=analysis.utilisation_target)  # fmt: skip

    return report
