"""Prices per GPU-hour from a price book (YAML), and NVML names mapped to its model keys.

A price book has one currency, a price per canonical GPU model for two plans
(``on_demand`` and ``reserved``: the 1-year commitment as an hourly equivalent) and
optionally more (``plans:`` monthly, 1y, 3y, spot; collector/analysis/price_plans.py),
what the fleet buys today (``current_plan``, or ``current: {plan: 1y, gpus: 8}``),
optional per-node overrides and a list of sources. ``PriceBook.example()`` is the
shipped example (``collector/data/pricebook.yaml``). A model without a price costs 0.0
and ``has_price`` says so, so callers can flag it instead of crashing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from collector.analysis.price_plans import (
    CURRENT_PLANS,
    ON_DEMAND,
    ONE_YEAR,
    PLAN_NAMES,
    RESERVED,
    PlanPrice,
    parse_current,
    parse_plans,
    plan_name,
    price_value,
)
from gpufleet.settings import ConfigError

EXAMPLE_PRICE_BOOK = Path(__file__).parents[1] / "data" / "pricebook.yaml"
#: every plan name a price can be asked for (``reserved`` is the 1-year plan)
PLANS = (RESERVED, *PLAN_NAMES)

#: longest names first where one is a prefix of another (L40S before L40 before L4)
_MODEL_PATTERN = re.compile(
    r"(?<![A-Z0-9])(GB200|GH200|B200|B100|H200|H100|H800|A100|A800|L40S|L40|L4|T4|A10G|A10|V100)"
    r"(?![0-9])"
)


@functools.lru_cache(maxsize=1024)  # a fleet has a handful of names; this runs per GPU-tick
def canonical_model(nvml_name: str) -> str:
    """The price-book key for an NVML device name: ``"NVIDIA H100 80GB HBM3"`` -> ``H100``,
    ``"NVIDIA A100-SXM4-80GB"`` -> ``A100``, ``"NVIDIA A100-PCIE-40GB"`` -> ``A100-40GB``,
    ``"Tesla T4"`` -> ``T4``; simulator names such as ``"H100"`` map to themselves. An
    unrecognised name is returned unchanged (stripped)."""
    upper = nvml_name.upper()
    match = _MODEL_PATTERN.search(upper)
    if match is None:
        return nvml_name.strip()
    model = match.group(1)
    if model == "A100" and "40GB" in upper.replace(" ", ""):
        return "A100-40GB"
    return model


@dataclass(frozen=True)
class ModelPrice:
    on_demand_per_gpu_hour: float
    #: the 1-year commitment's hourly equivalent (the ``1y`` plan)
    reserved_per_gpu_hour: float
    #: the plan the fleet pays now, which pricing-plan advice compares against
    current_plan: str = ON_DEMAND
    source: str = ""
    #: plans listed beyond the two prices (monthly, 3y, spot; a 1y entry's term and upfront)
    plans: tuple[PlanPrice, ...] = ()
    #: how many of a group's GPUs are on ``current_plan`` (None: all; the rest on demand)
    current_gpus: int | None = None

    def per_gpu_hour(self, plan: str) -> float:
        """The hourly price of ``plan``; ValueError naming it when this entry lacks it."""
        option = self.plan(plan)
        if option is None:
            offered = ", ".join(p.name for p in self.options())
            raise ValueError(f"no {plan!r} plan in this price entry (it has {offered})")
        return option.per_gpu_hour

    def plan(self, name: str) -> PlanPrice | None:
        wanted = plan_name(name)
        return next((p for p in self.options() if p.name == wanted), None)

    def options(self) -> tuple[PlanPrice, ...]:
        """Every plan this entry offers, on demand first; the 1-year plan's price is
        ``reserved_per_gpu_hour`` (term and upfront share from ``plans`` where listed)."""
        listed = {p.name: p for p in self.plans}
        one_year = listed.get(ONE_YEAR, PlanPrice(ONE_YEAR, 0.0, 12))
        listed[ONE_YEAR] = replace(one_year, per_gpu_hour=self.reserved_per_gpu_hour)
        ordered = sorted(listed.values(), key=lambda p: PLAN_NAMES.index(p.name))
        return (PlanPrice(ON_DEMAND, self.on_demand_per_gpu_hour), *ordered)


@dataclass(frozen=True)
class PriceBook:
    currency: str
    models: Mapping[str, ModelPrice]
    node_overrides: Mapping[str, Mapping[str, ModelPrice]] = field(default_factory=dict)
    sources: tuple[Mapping[str, str], ...] = ()
    #: what a MIG slice's share of its parent's price is counted by: "compute" (g / 7)
    #: or "memory" (collector/analysis/mig_price.py)
    mig_price_basis: str = "compute"

    @classmethod
    def load(cls, path: Path) -> PriceBook:
        """Read a price book; raises ConfigError naming the file, key and bad value."""
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"price book {path}: cannot read: {err}") from err
        return cls.from_mapping(raw, str(path))

    @classmethod
    def example(cls) -> PriceBook:
        """The shipped example price book (approximate 2026 cloud list prices, USD)."""
        return cls.load(EXAMPLE_PRICE_BOOK)

    @classmethod
    def from_mapping(cls, raw: object, where: str = "price book") -> PriceBook:
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping at the top level")
        _reject_unknown(
            raw, {"currency", "models", "node_overrides", "sources", "mig_price_basis"}, where
        )
        currency = raw.get("currency")
        if not isinstance(currency, str) or not currency:
            raise ConfigError(f"{where}: currency: expected a currency code, got {currency!r}")
        models = _parse_models(raw.get("models") or {}, f"{where}: models", None)
        overrides = {
            str(node): _parse_models(entries or {}, f"{where}: node_overrides.{node}", models)
            for node, entries in (raw.get("node_overrides") or {}).items()
        }
        sources = tuple({str(k): str(v) for k, v in s.items()} for s in raw.get("sources") or [])
        basis = raw.get("mig_price_basis", "compute")
        if basis not in ("compute", "memory"):
            raise ConfigError(
                f"{where}: mig_price_basis: expected 'compute' or 'memory', got {basis!r}"
            )
        return cls(currency, models, overrides, sources, basis)

    def model_price(self, model: str, node: str = "") -> ModelPrice | None:
        """The price entry for a model (NVML or canonical name) on a node, or None."""
        key = canonical_model(model)
        override = self.node_overrides.get(node, {}).get(key)
        return override if override is not None else self.models.get(key)

    def has_price(self, model: str, node: str = "") -> bool:
        return self.model_price(model, node) is not None

    def price_per_gpu_hour(self, model: str, node: str = "", plan: str = "on_demand") -> float:
        """Price of one GPU-hour in ``currency``; 0.0 for a model without a price."""
        if plan not in PLANS:
            raise ValueError(f"unknown pricing plan {plan!r}; expected one of {PLANS}")
        price = self.model_price(model, node)
        if price is None:
            return 0.0
        option = price.plan(plan)
        if option is None:
            raise ValueError(f"{model}: no {plan!r} plan in the price book")
        return option.per_gpu_hour

    def break_even_utilisation(self, model: str, node: str = "") -> float:
        """reserved / on-demand: the allocated fraction of hours above which the reserved
        plan costs less. 1.0 (never) for a model without a price."""
        price = self.model_price(model, node)
        if price is None or price.on_demand_per_gpu_hour <= 0:
            return 1.0
        return price.reserved_per_gpu_hour / price.on_demand_per_gpu_hour


_PRICE_KEYS = {"on_demand_per_gpu_hour", "reserved_per_gpu_hour", "current_plan", "source",
               "plans", "current"}  # fmt: skip


def _parse_models(
    raw: Any, where: str, base: Mapping[str, ModelPrice] | None
) -> dict[str, ModelPrice]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of model -> prices")
    return {
        canonical_model(str(name)): _parse_price(entry, f"{where}.{name}", _base(base, name))
        for name, entry in raw.items()
    }


def _base(base: Mapping[str, ModelPrice] | None, name: object) -> ModelPrice | None:
    return None if base is None else base.get(canonical_model(str(name)))


def _parse_price(raw: Any, where: str, base: ModelPrice | None) -> ModelPrice:
    """One model's prices; an override may leave out keys, which then come from ``base``."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {raw!r}")
    _reject_unknown(raw, _PRICE_KEYS, where)
    values: dict[str, Any] = {} if base is None else dict(base.__dict__)
    values.update({k: v for k, v in raw.items() if k not in ("plans", "current")})
    if "plans" in raw:
        values["plans"] = parse_plans(raw["plans"], f"{where}.plans")
        _one_year_price(raw, values, where)
    if "current" in raw:
        if "current_plan" in raw:
            raise ConfigError(f"{where}: give current or current_plan, not both")
        values["current_plan"], values["current_gpus"] = parse_current(
            raw["current"], f"{where}.current"
        )
    for key in ("on_demand_per_gpu_hour", "reserved_per_gpu_hour"):
        values[key] = price_value(values.get(key), f"{where}.{key}")
    current = values.get("current_plan", ON_DEMAND)
    if current not in CURRENT_PLANS:
        raise ConfigError(f"{where}.current_plan: expected one of {CURRENT_PLANS}, got {current!r}")
    values["current_plan"] = plan_name(current)
    price = ModelPrice(**values)
    if price.plan(price.current_plan) is None:
        raise ConfigError(f"{where}.current_plan: {current!r} is not a plan this entry lists")
    return price


def _one_year_price(raw: dict[Any, Any], values: dict[str, Any], where: str) -> None:
    """A listed 1y plan is ``reserved_per_gpu_hour``: it sets it, or must agree with it."""
    one_year = next((p for p in values["plans"] if p.name == ONE_YEAR), None)
    if one_year is None:
        return
    given = raw.get("reserved_per_gpu_hour")
    if given is not None and given != one_year.per_gpu_hour:
        raise ConfigError(
            f"{where}.plans.1y.per_gpu_hour: {one_year.per_gpu_hour!r} differs from "
            f"reserved_per_gpu_hour {given!r} (the same 1-year plan)"
        )
    values["reserved_per_gpu_hour"] = one_year.per_gpu_hour


def _reject_unknown(raw: dict[Any, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
