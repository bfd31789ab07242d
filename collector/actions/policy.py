"""When to warn, when to act, and when never to: a pure function of the fleet view.

A candidate is a workload with a standing release recommendation. Its deadline is the
later of (start of the idle episode + ``release_after_seconds``) and (first seen +
``min_runtime_seconds``). Warnings fall at the configured fractions of the way to the
deadline. Unknown or stale data (a GPU in state UNKNOWN, never seen, or last seen longer
ago than ``max_data_age_seconds``) is never acted on; a GPU in use again cancels all.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from collector.actions.settings import PolicySettings
from collector.records import GpuState, GpuView, WorkloadRef


@dataclass(frozen=True)
class Candidate:
    workload: WorkloadRef
    views: tuple[GpuView, ...]
    first_seen: float


@dataclass(frozen=True)
class Decision:
    #: warn:<fraction> | act | notify_only | skip:stale | skip:exempt
    stage: str
    episode_start: float
    deadline: float


def data_problem(views: Sequence[GpuView], now: float, max_age_seconds: float) -> str | None:
    """``stale`` when any GPU's data is unknown or old, ``active`` when any is not idle."""
    if not views:
        return "stale"
    for view in views:
        age = None if view.last_seen is None else now - view.last_seen
        if view.state is GpuState.UNKNOWN or age is None or age > max_age_seconds:
            return "stale"
    if any(v.state is not GpuState.ALLOCATED_IDLE or v.idle_since is None for v in views):
        return "active"
    return None


def deadline_of(c: Candidate, policy: PolicySettings) -> tuple[float, float]:
    """(start of the idle episode, deadline)."""
    episode_start = max(v.idle_since or 0.0 for v in c.views)
    deadline = max(
        episode_start + policy.release_after_seconds, c.first_seen + policy.min_runtime_seconds
    )
    return episode_start, deadline


def decide(
    c: Candidate,
    policy: PolicySettings,
    done: Mapping[str, float],
    now: float,
    max_age_seconds: float,
    episode_hint: float = 0.0,
) -> Decision | None:
    """The next step for ``c`` not yet in ``done`` (stage -> when it was recorded, for
    this idle episode), or None. ``episode_hint`` names the episode when the data cannot
    (stale data)."""
    if policy.mode == "off":
        return None
    problem = data_problem(c.views, now, max_age_seconds)
    if problem == "stale":
        return Decision("skip:stale", episode_hint, 0.0)
    if problem == "active":
        return None
    start, deadline = deadline_of(c, policy)
    span = policy.release_after_seconds
    if now >= deadline:
        return _at_deadline(policy, done, start, deadline, now)
    due = [f for f in sorted(policy.warn_at) if now >= deadline - (1.0 - f) * span]
    if due and f"warn:{due[-1]}" not in done:
        return Decision(f"warn:{due[-1]}", start, deadline)
    return None


def _at_deadline(
    policy: PolicySettings, done: Mapping[str, float], start: float, deadline: float, now: float
) -> Decision | None:
    """The action, but never without the last warning first: when it was missed (the
    collector was down, data was stale), it goes out now and the action waits the time
    that warning promises."""
    final = "act" if policy.mode == "enforce" else "notify_only"
    if not policy.warn_at:
        return Decision(final, start, deadline)
    last = max(policy.warn_at)
    grace = (1.0 - last) * policy.release_after_seconds
    warned_at = done.get(f"warn:{last}")
    if warned_at is None:
        return Decision(f"warn:{last}", start, max(deadline, now + grace))
    # the deadline that warning announced: on time, the deadline; sent late, its grace
    promised = deadline if warned_at < deadline else warned_at + grace
    if now < promised:
        return None
    return Decision(final, start, promised)


def exempt_by_settings(
    workload: WorkloadRef, namespaces: Collection[str], users: Collection[str]
) -> bool:
    return workload.namespace in namespaces or (bool(workload.user) and workload.user in users)
