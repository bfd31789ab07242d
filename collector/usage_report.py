"""Usage over a period grouped by namespace, team, model or node (``gpufleet report``),
and the one rule for the periods the ledger answers, which ``/v1/workloads`` follows too.

The ledger keeps usage as hourly rollups, so a figure can only be exact for whole hours.
``ledger_period`` widens the period asked to the hours it touches: nothing asked is left
out (a period from 22:15 starts at 22:00), and every answer states the period its figures
cover. Every grouping adds up to the same fleet total: the GPUs' rollups.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

from collector.ledger.queries import Group
from collector.ledger.store import Ledger
from collector.records import HOUR_SECONDS, Usage

#: the row of GPU time nobody held (namespace and team groupings)
UNALLOCATED = "(unallocated)"
#: the row of workloads without the label grouped by (by account: what is not a Slurm job)
NO_LABEL = "(none)"
PERIOD_RULE = (
    "the ledger keeps hourly totals: a period is widened to the whole hours it touches "
    "(the hour in progress counts up to now)"
)
_USAGE_FIELDS = Usage.__struct_fields__


@dataclass(frozen=True, slots=True)
class LedgerPeriod:
    """A period asked (``asked_start``..``asked_end``) and the one the hourly rollups
    answer (``start``..``end``, Unix seconds): ``start`` is the start of the hour the asked
    start is in; ``end`` the end of the hour the asked end is in, or now when that is
    earlier (nothing after now is recorded)."""

    asked_start: float
    asked_end: float
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def ledger_period(start: float, end: float, now: float) -> LedgerPeriod:
    """The period the ledger's hourly rollups answer for ``[start, end)``."""
    first_hour = math.floor(start / HOUR_SECONDS) * HOUR_SECONDS
    last_hour_end = math.ceil(end / HOUR_SECONDS) * HOUR_SECONDS
    return LedgerPeriod(start, end, first_hour, min(last_hour_end, max(end, now)))


@dataclass(frozen=True, slots=True)
class GroupReport:
    """Usage per group over ``period``; the rows add up to ``total`` (the fleet's)."""

    by: Group
    period: LedgerPeriod
    rows: list[tuple[str, Usage]]
    total: Usage


def group_report(ledger: Ledger, by: Group, period: LedgerPeriod) -> GroupReport:
    """Usage by ``by`` over ``period`` (as ``ledger_period`` widened it).

    The fleet total is the GPUs' rollups (what the node grouping sums). Namespace, team and owner
    sum the workloads' rollups, which split each held GPU's usage among its holders; what
    is left of the total is time nobody held, the ``UNALLOCATED`` row, so these groupings
    add up to the same total as model and node do."""
    groups = ledger.usage_by_group(period.start, period.end, by)
    by_node = groups if by == "node" else ledger.usage_by_group(period.start, period.end, "node")
    total = usage_sum(u for _, u in by_node)
    rows = [(name or NO_LABEL, usage) for name, usage in groups]
    if by in ("namespace", "team", "user", "owner", "queue", "account"):
        unallocated = usage_left(total, usage_sum(u for _, u in groups))
        if any(getattr(unallocated, f) > 0 for f in _USAGE_FIELDS):
            rows.append((UNALLOCATED, unallocated))
    return GroupReport(by, period, rows, total)


def usage_sum(usages: Iterable[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total.add(usage)
    return total


def usage_left(total: Usage, part: Usage) -> Usage:
    """``total - part`` field by field, never below zero (float noise of the splits)."""
    return msgspec.structs.replace(
        total, **{f: max(0.0, getattr(total, f) - getattr(part, f)) for f in _USAGE_FIELDS}
    )
