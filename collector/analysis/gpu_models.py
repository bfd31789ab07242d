"""GPU models as right-sizing sees them: memory, relative compute, power, MIG profiles.

Loaded from ``collector/data/gpu_models.yaml`` (``GpuCatalogue.default()``); keys are the
canonical model names of ``collector.analysis.cost.canonical_model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from collector.analysis.cost import canonical_model

DEFAULT_CATALOGUE = Path(__file__).parents[1] / "data" / "gpu_models.yaml"


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.10gb"
    memory_bytes: float
    compute_fraction: float  # g / 7 of the parent's SMs (its price: mig_price.py)


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_bytes: float
    #: dense FP16/BF16 tensor throughput relative to an H100 SXM
    relative_compute: float
    tdp_watts: float
    idle_watts: float
    mig_profiles: tuple[MigProfile, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class GpuCatalogue:
    models: Mapping[str, GpuModel]

    @classmethod
    def load(cls, path: Path) -> GpuCatalogue:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return cls({str(k): _model(str(k), v) for k, v in raw["models"].items()})

    @classmethod
    def default(cls) -> GpuCatalogue:
        return cls.load(DEFAULT_CATALOGUE)

    def get(self, model: str) -> GpuModel | None:
        """The entry for an NVML or canonical model name, or None."""
        return self.models.get(canonical_model(model))


def _model(name: str, raw: dict[str, Any]) -> GpuModel:
    profiles = tuple(
        MigProfile(p, float(v["memory_bytes"]), float(v["compute_fraction"]))
        for p, v in (raw.get("mig_profiles") or {}).items()
    )
    return GpuModel(
        name=name,
        memory_bytes=float(raw["memory_bytes"]),
        relative_compute=float(raw["relative_compute"]),
        tdp_watts=float(raw["tdp_watts"]),
        idle_watts=float(raw["idle_watts"]),
        mig_profiles=profiles,
    )
