"""Prices per GPU-hour from a price book (YAML), and NVML names mapped to its model keys.

A price book has one currency, a price per canonical GPU model for two plans
(``on_demand`` and ``reserved``: the 1-year commitment as an hourly equivalent),
optional per-node overrides and a list of sources. ``PriceBook.example()`` is the
shipped example (``collector/data/pricebook.yaml``). A model without a price costs 0.0
and ``has_price`` says so, so callers can flag it instead of crashing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufleet.settings import ConfigError

EXAMPLE_PRICE_BOOK = Path(__file__).parents[1] / "data" / "pricebook.yaml"
PLANS = ("on_demand", "reserved")

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
    reserved_per_gpu_hour: float
    #: the plan the fleet pays now, which pricing-plan advice compares against
    current_plan: str = "on_demand"
    source: str = ""

    def per_gpu_hour(self, plan: str) -> float:
        return self.reserved_per_gpu_hour if plan == "reserved" else self.on_demand_per_gpu_hour


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
        return price.per_gpu_hour(plan) if price is not None else 0.0

    def break_even_utilisation(self, model: str, node: str = "") -> float:
        """reserved / on-demand: the allocated fraction of hours above which the reserved
        plan costs less. 1.0 (never) for a model without a price."""
        price = self.model_price(model, node)
        if price is None or price.on_demand_per_gpu_hour <= 0:
            return 1.0
        return price.reserved_per_gpu_hour / price.on_demand_per_gpu_hour


_PRICE_KEYS = {"on_demand_per_gpu_hour", "reserved_per_gpu_hour", "current_plan", "source"}


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
    values.update(raw)
    for key in ("on_demand_per_gpu_hour", "reserved_per_gpu_hour"):
        value = values.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ConfigError(f"{where}.{key}: expected a price >= 0, got {value!r}")
        values[key] = float(value)
    if values.get("current_plan", "on_demand") not in PLANS:
        raise ConfigError(
            f"{where}.current_plan: expected one of {PLANS}, got {values['current_plan']!r}"
        )
    return ModelPrice(**values)


def _reject_unknown(raw: dict[Any, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
