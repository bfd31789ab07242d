"""Hand-made pricing look-backs: a pool's hourly allocation curve as the ledger would give
it (``Ledger.model_usage`` and ``Ledger.model_hours``)."""

from __future__ import annotations

from collections.abc import Sequence

from collector.records import HOUR_SECONDS, ModelHour, ModelUsage

NOW = 1_800_000_000.0
#: the default look-back, 30 days
HOURS = 30 * 24


def pool(
    pattern: Sequence[float],
    gpu_count: int,
    node: str = "n1",
    model: str = "H100",
    hours: int = HOURS,
    active_share: float = 0.8,
) -> tuple[list[ModelUsage], list[ModelHour]]:
    """``gpu_count`` GPUs seen every hour of the last ``hours``; in hour h,
    ``pattern[h % len(pattern)]`` of them allocated on average, ``active_share`` of that
    active."""
    first = NOW - hours * HOUR_SECONDS
    rows = [
        ModelHour(model, node, first + h * HOUR_SECONDS, d * HOUR_SECONDS,
                  d * HOUR_SECONDS * active_share)
        for h in range(hours)
        for d in [pattern[h % len(pattern)]]
    ]  # fmt: skip
    observed = gpu_count * hours * HOUR_SECONDS
    allocated = sum(r.allocated_seconds for r in rows)
    active = sum(r.active_seconds for r in rows)
    return [ModelUsage(model, node, gpu_count, observed, allocated, active)], rows
