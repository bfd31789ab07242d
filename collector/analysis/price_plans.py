"""The ways a GPU can be bought, as a price book lists them per model.

``on_demand`` is pay-as-you-go by the hour. ``monthly``, ``1y`` and ``3y`` are commitments:
the GPU is paid for every hour of the term whether it is used or not, at an hourly
equivalent (upfront payment spread over the term's hours); ``upfront_share`` says how much
of the term's total is paid before it starts. ``spot`` is preemptible capacity by the hour:
shown in what-if costs, never recommended for a reserved baseline (it can be taken away).
Today's two-price format has only ``reserved_per_gpu_hour``: the 1-year commitment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.settings import ConfigError

ON_DEMAND = "on_demand"
#: today's format's name for the 1-year commitment (``reserved_per_gpu_hour``)
RESERVED = "reserved"
ONE_YEAR = "1y"
SPOT = "spot"
#: commitment -> its term in months unless the book says otherwise
COMMITMENT_TERMS = {"monthly": 1, ONE_YEAR: 12, "3y": 36}
PLAN_NAMES = (ON_DEMAND, *COMMITMENT_TERMS, SPOT)
#: what a fleet can be buying today (spot is never a baseline)
CURRENT_PLANS = (ON_DEMAND, RESERVED, *COMMITMENT_TERMS)
PLAN_TITLES = {ON_DEMAND: "on demand", "monthly": "a monthly plan", ONE_YEAR: "a 1-year plan",
               "3y": "a 3-year plan", SPOT: "spot"}  # fmt: skip
_PLAN_KEYS = {"per_gpu_hour", "term_months", "upfront_share"}


@dataclass(frozen=True, slots=True)
class PlanPrice:
    """One plan's price for one GPU: ``per_gpu_hour`` in the book's currency (the hourly
    equivalent for a commitment), ``term_months`` (0: no commitment), ``upfront_share``
    (0..1 of the term's total paid up front)."""

    name: str
    per_gpu_hour: float
    term_months: int = 0
    upfront_share: float = 0.0

    @property
    def commitment(self) -> bool:
        return self.name in COMMITMENT_TERMS


def plan_name(name: str) -> str:
    """The plan a name means: ``reserved`` (today's format) is the 1-year commitment."""
    return ONE_YEAR if name == RESERVED else name


def parse_plans(raw: Any, where: str) -> tuple[PlanPrice, ...]:
    """``plans:`` of one price entry: plan name -> an hourly price, or a mapping with
    ``per_gpu_hour``, ``term_months`` and ``upfront_share``. On demand is not listed here
    (it is ``on_demand_per_gpu_hour``)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of plan -> price, got {raw!r}")
    allowed = PLAN_NAMES[1:]
    out = []
    for name, entry in raw.items():
        if name not in allowed:
            raise ConfigError(f"{where}.{name}: unknown plan; expected one of {allowed}")
        out.append(_parse_plan(str(name), entry, f"{where}.{name}"))
    return tuple(sorted(out, key=lambda p: PLAN_NAMES.index(p.name)))


def _parse_plan(name: str, raw: Any, where: str) -> PlanPrice:
    entry = raw if isinstance(raw, Mapping) else {"per_gpu_hour": raw}
    unknown = sorted(str(k) for k in entry if k not in _PLAN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    price = price_value(entry.get("per_gpu_hour"), f"{where}.per_gpu_hour")
    term = entry.get("term_months", COMMITMENT_TERMS.get(name, 0))
    if isinstance(term, bool) or not isinstance(term, int) or term < 0:
        raise ConfigError(f"{where}.term_months: expected a whole number >= 0, got {term!r}")
    if name == SPOT and term:
        raise ConfigError(f"{where}.term_months: spot has no term, got {term!r}")
    upfront = entry.get("upfront_share", 0.0)
    if isinstance(upfront, bool) or not isinstance(upfront, int | float) or not 0 <= upfront <= 1:
        raise ConfigError(f"{where}.upfront_share: expected a share in [0, 1], got {upfront!r}")
    return PlanPrice(name, price, term, float(upfront))


def price_value(value: object, where: str) -> float:
    """A price: a number >= 0; ConfigError naming ``where`` and the value otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(f"{where}: expected a price >= 0, got {value!r}")
    return float(value)


def parse_current(raw: Any, where: str) -> tuple[str, int | None]:
    """``current: {plan: 1y, gpus: 8}``: what the fleet buys today, and how many of the
    group's GPUs are on that plan (None: all of them; the rest are on demand)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping with plan and gpus, got {raw!r}")
    unknown = sorted(str(k) for k in raw if k not in ("plan", "gpus"))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    plan = raw.get("plan")
    if plan not in CURRENT_PLANS:
        raise ConfigError(f"{where}.plan: expected one of {CURRENT_PLANS}, got {plan!r}")
    gpus = raw.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0):
        raise ConfigError(f"{where}.gpus: expected a whole number >= 0, got {gpus!r}")
    return plan_name(str(plan)), gpus
