"""Filters and pages over the read views: pure functions over plain data.

A page is ``limit`` items after a cursor. The cursor is the last item's sort key, named
by its view and encoded URL-safe (base64url of JSON), so a page follows on from where the
previous one ended even when the fleet changed in between (nothing is skipped or seen
twice that stayed in place). A cursor that does not decode, or that another view wrote,
is refused: ``CursorError``.
"""

from __future__ import annotations

import base64
import binascii
import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from collector.records import GpuView, Recommendation

T = TypeVar("T")
#: an item's place in its view's order: strings and numbers, compared as a tuple
SortKey = tuple[Any, ...]


class CursorError(ValueError):
    """A cursor this collector did not write for this view."""


@dataclass(frozen=True, slots=True)
class GpuFilter:
    """GPUs to list; an empty set matches everything. A GPU is in a namespace or team
    when any workload holding it is."""

    states: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    teams: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()
    #: workload keys holding the GPU ("pod:ml/notebook-7")
    workloads: frozenset[str] = frozenset()
    #: "problem" (any HealthProblem, or unhealthy), "ok" (neither), or HealthProblem values
    health: frozenset[str] = frozenset()

    def matches(self, view: GpuView) -> bool:
        return (
            (not self.states or view.state.value in self.states)
            and (not self.health or _health_matches(self.health, view))
            and (not self.nodes or view.node in self.nodes)
            and (not self.models or view.model in self.models)
            and (not self.namespaces or any(w.namespace in self.namespaces for w in view.workloads))
            and (not self.teams or any(w.team in self.teams for w in view.workloads))
            and (not self.workloads or any(w.key in self.workloads for w in view.workloads))
        )


def _health_matches(wanted: frozenset[str], view: GpuView) -> bool:
    problem = bool(view.problems) or not view.healthy
    return (
        ("problem" in wanted and problem)
        or ("ok" in wanted and not problem)
        or any(p in wanted for p in view.problems)
    )


@dataclass(frozen=True, slots=True)
class RecommendationFilter:
    """Recommendations to list; an empty set matches everything. ``team`` matches a
    recommendation whose workload holds a GPU of that team now (recommendations carry a
    namespace, not a team)."""

    kinds: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    teams: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()

    def matches(self, rec: Recommendation, team_of: Callable[[str], str]) -> bool:
        return (
            (not self.kinds or rec.kind.value in self.kinds)
            and (not self.namespaces or rec.namespace in self.namespaces)
            and (not self.nodes or rec.node in self.nodes)
            and (not self.teams or team_of(rec.workload_key) in self.teams)
        )


@dataclass(frozen=True, slots=True)
class PageRequest:
    """At most ``limit`` items (None: all) after the item whose key is ``after``."""

    limit: int | None = None
    after: SortKey | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    #: items matching the filter, on every page
    total: int
    #: the cursor of the next page; None on the last
    next_cursor: str | None


def gpu_key(view: GpuView) -> SortKey:
    """/v1/fleet's order: node, index, uuid."""
    return (view.node, view.index, view.uuid)


def recommendation_key(rec: Recommendation) -> SortKey:
    """/v1/recommendations' order: most valuable first, then id."""
    return (-rec.savings.money_per_month, rec.id)


def paginate(
    items: Sequence[T], key: Callable[[T], SortKey], view: str, request: PageRequest
) -> Page[T]:
    """``items`` (already filtered) in ``key`` order, the requested page of them."""
    ordered = sorted(items, key=key)
    start = 0
    if request.after is not None:
        start = bisect.bisect_right(ordered, request.after, key=key)
    end = len(ordered) if request.limit is None else start + request.limit
    page = ordered[start:end]
    more = end < len(ordered) and page
    return Page(page, len(ordered), encode_cursor(view, key(page[-1])) if more else None)


def encode_cursor(view: str, key: SortKey) -> str:
    raw = msgspec.json.encode([view, *key])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(text: str, view: str, shape: Sequence[type]) -> SortKey:
    """The sort key ``text`` holds; CursorError unless ``view`` wrote it with ``shape``."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        decoded = msgspec.json.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise CursorError("not a cursor this collector gave") from None
    if not isinstance(decoded, list) or not decoded or decoded[0] != view:
        raise CursorError(f"not a cursor of {view}")
    key = decoded[1:]
    if len(key) != len(shape) or not all(_fits(v, t) for v, t in zip(key, shape, strict=True)):
        raise CursorError(f"not a cursor of {view}")
    return tuple(float(v) if t is float else v for v, t in zip(key, shape, strict=True))


def _fits(value: object, kind: type) -> bool:
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, kind) and not isinstance(value, bool)
