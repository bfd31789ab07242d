"""Simulated GPU hardware: the model table and the board power model.

Power figures follow ../shared/research/energy-carbon.md section 4 (TDP from datasheets,
idle figures from public nvidia-smi outputs; B200 context idle is a guess). Memory sizes
are what NVML reports (``nvidia-smi`` "MiB" totals).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

MIB = 1024 * 1024

#: sustained full load draws this share of TDP (energy-carbon.md: 0.75-0.85 x TDP)
TDP_EFFECTIVE_RATIO = 0.85
#: per-board gain is N(1, GAIN_SIGMA), clipped to +-3 sigma (sensor tolerance about +-5 %)
GAIN_SIGMA = 0.025


@dataclass(frozen=True)
class GpuModel:
    """One GPU product as the simulator sees it; powers in watts, memory in bytes."""

    key: str
    #: the name NVML reports (nvmlDeviceGetName)
    name: str
    architecture: str
    tdp_watts: float
    #: no process resident, persistence mode on
    bare_idle_watts: float
    #: a process holds a context, 0 % utilisation
    context_idle_watts: float
    memory_total_bytes: int
    max_sm_clock_hertz: float
    idle_sm_clock_hertz: float

    @property
    def has_gpm(self) -> bool:
        """GPM (SM/DRAM/tensor activity counters) exists on Hopper and newer."""
        return self.architecture in ("hopper", "blackwell")

    @property
    def has_hbm(self) -> bool:
        return self.architecture in ("ampere", "hopper", "blackwell")


GPU_MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel("H100", "NVIDIA H100 80GB HBM3", "hopper", 700.0, 70.0, 110.0,
                 81559 * MIB, 1.98e9, 345e6),
        GpuModel("H200", "NVIDIA H200", "hopper", 700.0, 80.0, 120.0,
                 143771 * MIB, 1.98e9, 345e6),
        GpuModel("A100", "NVIDIA A100-SXM4-80GB", "ampere", 400.0, 55.0, 80.0,
                 81920 * MIB, 1.41e9, 210e6),
        GpuModel("L40S", "NVIDIA L40S", "ada", 350.0, 32.0, 83.0,
                 46068 * MIB, 2.52e9, 210e6),
        GpuModel("L4", "NVIDIA L4", "ada", 72.0, 14.0, 30.0,
                 23034 * MIB, 2.04e9, 210e6),
        GpuModel("T4", "Tesla T4", "turing", 70.0, 12.0, 30.0,
                 15360 * MIB, 1.59e9, 300e6),
        GpuModel("B200", "NVIDIA B200", "blackwell", 1000.0, 140.0, 200.0,
                 183359 * MIB, 1.965e9, 345e6),
    )
}  # fmt: skip


def gpu_model(key: str) -> GpuModel:
    """The model called ``key`` (``"H100"``, ...); ValueError naming the known keys."""
    try:
        return GPU_MODELS[key]
    except KeyError:
        known = ", ".join(GPU_MODELS)
        raise ValueError(f"unknown simulated GPU model {key!r}; known: {known}") from None


def board_gain(seed_text: str) -> float:
    """A deterministic per-board power gain drawn from N(1, GAIN_SIGMA), clipped to 3 sigma."""
    digest = hashlib.blake2b(seed_text.encode(), digest_size=16).digest()
    u1 = (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64
    u2 = (int.from_bytes(digest[8:], "big") + 0.5) / 2.0**64
    normal = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
    return 1.0 + GAIN_SIGMA * max(-3.0, min(3.0, normal))


def board_power_watts(
    model: GpuModel, gain: float, sm_activity: float, dram_activity: float, context: bool
) -> float:
    """P = gain * (P_idle + (TDP_eff - P_idle) * f), f = 0.8 sm + 0.2 dram, clipped to 0..1.

    ``context`` selects the idle floor: context idle when a process is resident, else bare.
    Never exceeds TDP: TDP_eff = 0.85 TDP and the gain is at most 1.075.
    """
    idle = model.context_idle_watts if context else model.bare_idle_watts
    load = min(1.0, max(0.0, 0.8 * sm_activity + 0.2 * dram_activity))
    return gain * (idle + (model.tdp_watts * TDP_EFFECTIVE_RATIO - idle) * load)


def temperature_celsius(model: GpuModel, power_watts: float) -> float:
    """A plausible die temperature: 28 C idle-cold plus up to 50 C at TDP."""
    return round(28.0 + 50.0 * power_watts / model.tdp_watts, 0)
