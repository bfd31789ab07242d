"""Which channels get an event: routes match on source, severity, namespace, team, labels;
a route ``to_owner_team`` also sends to the channels of the event's team (the directory)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from collector.notify.messages import Event
from collector.notify.settings import SEVERITY_RANK, RouteSettings


def route(
    event: Event,
    routes: Sequence[RouteSettings],
    channels: Sequence[str],
    team_channels: Callable[[str], Sequence[str]] = lambda team: (),
) -> list[str]:
    """Channel names for ``event`` in configuration order, each once. No routes: all."""
    if not routes:
        return list(channels)
    out: list[str] = []
    for candidate in routes:
        if matches(candidate, event):
            chosen = list(candidate.channels)
            if candidate.to_owner_team:
                chosen += team_channels(event.labels.get("team", ""))
            out += [name for name in chosen if name not in out and name in channels]
    return out


def matches(candidate: RouteSettings, event: Event) -> bool:
    labels = event.labels
    if event.source not in candidate.sources:
        return False
    if SEVERITY_RANK.get(event.severity, 0) < SEVERITY_RANK[candidate.min_severity]:
        return False
    if candidate.namespaces and labels.get("namespace", "") not in candidate.namespaces:
        return False
    if candidate.teams and labels.get("team", "") not in candidate.teams:
        return False
    return all(labels.get(key) == value for key, value in candidate.labels.items())
