"""The read routes' query parameters: time windows, recommendation statuses, filters
and pages (collector/http/pages.py).

Each parser raises ``QueryError`` naming the parameter; the routes answer it with 422
``bad_query``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from collector.http.pages import (
    CursorError,
    GpuFilter,
    PageRequest,
    RecommendationFilter,
    decode_cursor,
)
from collector.records import (
    OPEN_STATUSES,
    GpuState,
    HealthProblem,
    RecommendationKind,
    RecommendationStatus,
)

DAY_SECONDS = 24 * 3600.0
#: the most items one page may hold
MAX_LIMIT = 1000
#: the parameters that make /v1/fleet and /v1/gpus/usage answer a filtered page
GPU_FILTERS = ("state", "node", "namespace", "team", "model", "workload", "health")
#: what ``health`` may name beside the HealthProblem values
HEALTH_CHOICES = ("problem", "ok")
PAGING = ("limit", "cursor")
#: the parameters that make /v1/recommendations answer a filtered page
RECOMMENDATION_FILTERS = ("kind", "namespace", "team", "node")


class QueryError(ValueError):
    """A bad query parameter; ``field`` names it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def parse_window(params: Any, now: float) -> tuple[float, float]:
    """(start, end) from ``start``/``end`` query values; default the 24 h before now."""
    end = parse_instant(params["end"], "end") if "end" in params else now
    start = parse_instant(params["start"], "start") if "start" in params else end - DAY_SECONDS
    if start >= end:
        raise QueryError(f"start ({start:g}) must be before end ({end:g})", "start")
    return start, end


def parse_instant(text: str, name: str) -> float:
    """Unix seconds, or ISO 8601 (UTC when no offset is given; write '+' as %2B or use Z)."""
    try:
        value = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise QueryError(
                f"{name}: {text!r} is neither Unix seconds nor an ISO 8601 time", name
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = moment.timestamp()
    if not math.isfinite(value) or value < 0:
        raise QueryError(f"{name}: {text!r} is not a time after 1970", name)
    return value


def parse_statuses(text: str | None) -> tuple[RecommendationStatus, ...]:
    """``open,notified`` -> statuses; None -> open and notified; ``all`` -> every status."""
    if text is None:
        return OPEN_STATUSES
    if text.strip() == "all":
        return tuple(RecommendationStatus)
    statuses = []
    for word in filter(None, (part.strip() for part in text.split(","))):
        try:
            statuses.append(RecommendationStatus(word))
        except ValueError:
            known = ", ".join(s.value for s in RecommendationStatus)
            raise QueryError(f"status: {word!r} is not one of {known}, all", "status") from None
    if not statuses:
        raise QueryError("status: empty", "status")
    return tuple(statuses)


def parse_gpu_filter(params: Any) -> GpuFilter:
    """``state``, ``node``, ``namespace``, ``team``, ``model``, ``workload`` (keys),
    ``health`` (problem, ok or HealthProblem values): each a comma-separated list."""
    return GpuFilter(
        states=_choices(params, "state", GpuState),
        nodes=_values(params, "node"),
        namespaces=_values(params, "namespace"),
        teams=_values(params, "team"),
        models=_values(params, "model"),
        workloads=_values(params, "workload"),
        health=_health(params),
    )


def _health(params: Any) -> frozenset[str]:
    values = _values(params, "health")
    known = {*HEALTH_CHOICES, *(p.value for p in HealthProblem)}
    for value in sorted(values - known):
        raise QueryError(f"health: {value!r} is not one of {', '.join(sorted(known))}", "health")
    return values


def parse_recommendation_filter(params: Any) -> RecommendationFilter:
    """``kind``, ``namespace``, ``team``, ``node``: each a comma-separated list."""
    return RecommendationFilter(
        kinds=_choices(params, "kind", RecommendationKind),
        namespaces=_values(params, "namespace"),
        teams=_values(params, "team"),
        nodes=_values(params, "node"),
    )


def parse_page(params: Any, view: str, shape: Sequence[type]) -> PageRequest:
    """``limit`` (1..MAX_LIMIT; default all) and ``cursor`` (a view's ``next_cursor``)."""
    limit = None
    if "limit" in params:
        text = params["limit"]
        if not text.strip().isdigit() or not 1 <= int(text) <= MAX_LIMIT:
            raise QueryError(f"limit: {text!r} is not a whole number 1..{MAX_LIMIT}", "limit")
        limit = int(text)
    after = None
    if "cursor" in params:
        try:
            after = decode_cursor(params["cursor"], view, shape)
        except CursorError as err:
            raise QueryError(f"cursor: {err}", "cursor") from None
    return PageRequest(limit, after)


def asks_for_page(params: Any, names: Sequence[str]) -> bool:
    """Whether any of ``names`` (filters) or ``limit``/``cursor`` is given."""
    return any(name in params for name in (*names, *PAGING))


def _choices(params: Any, name: str, kinds: type[enum.StrEnum]) -> frozenset[str]:
    """``_values`` of ``name``, each one of ``kinds``' values (422 naming the first other)."""
    values = _values(params, name)
    known = {k.value for k in kinds}
    for value in sorted(values - known):
        raise QueryError(f"{name}: {value!r} is not one of {', '.join(sorted(known))}", name)
    return values


def _values(params: Any, name: str) -> frozenset[str]:
    if name not in params:
        return frozenset()
    values = frozenset(filter(None, (part.strip() for part in params[name].split(","))))
    if not values:
        raise QueryError(f"{name}: empty", name)
    return values
