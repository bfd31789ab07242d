"""The read routes' query parameters: time windows and recommendation statuses.

Each parser raises ``QueryError`` naming the parameter; the routes answer it with 422
``bad_query``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from collector.records import OPEN_STATUSES, RecommendationStatus

DAY_SECONDS = 24 * 3600.0


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
