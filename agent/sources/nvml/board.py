"""The board around the GPU: its PCIe link, its fan and its default SM clock.

The link's generation and width now and at most, and the default applications SM clock,
change rarely (the link drops to a lower generation when the GPU idles, and trains down
when a slot or riser is bad), so they are read once every ``SLOW_EVERY_READS`` reads and
their last answers reported in between. The fan is read every time. Each is a dedicated
call (no field id carries them) into one reused ``c_uint`` (structs.out_query); one the
GPU cannot answer is None from then on (calls.py's rule: passively cooled boards have no
fan, MIG instances no link of their own).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, NamedTuple

import pynvml

from agent.sources.nvml.calls import DeviceCalls
from agent.sources.nvml.fields import SLOW_EVERY_READS
from agent.sources.nvml.structs import out_query

_MHZ = 1_000_000


class LinkReadings(NamedTuple):
    """nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current,
    pcie.link.gen.max,pcie.link.width.max (``max``: what GPU and slot can train to), and
    clocks.default_applications.sm in Hz; None where the GPU cannot say."""

    pcie_link_generation: int | None = None
    pcie_link_width: int | None = None
    pcie_link_generation_max: int | None = None
    pcie_link_width_max: int | None = None
    sm_clock_default_hertz: float | None = None


#: field -> the NVML symbol that answers it (all take a handle and fill one c_uint)
_LINK_SYMBOLS = {
    "pcie_link_generation": "nvmlDeviceGetCurrPcieLinkGeneration",
    "pcie_link_width": "nvmlDeviceGetCurrPcieLinkWidth",
    "pcie_link_generation_max": "nvmlDeviceGetMaxPcieLinkGeneration",
    "pcie_link_width_max": "nvmlDeviceGetMaxPcieLinkWidth",
}


class BoardReader:
    """One physical GPU's link, fan and default clock."""

    def __init__(self, handle: Any, calls: DeviceCalls) -> None:
        self._calls = calls
        self._links = {field: out_query(symbol, handle) for field, symbol in _LINK_SYMBOLS.items()}
        self._default_clock = out_query(
            "nvmlDeviceGetDefaultApplicationsClock", handle, ctypes.c_uint(pynvml.NVML_CLOCK_SM)
        )
        self._fan = out_query("nvmlDeviceGetFanSpeed", handle)
        self._reads = 0
        self._last = LinkReadings()

    def links(self) -> LinkReadings:
        """The link and default clock: read afresh once every SLOW_EVERY_READS calls."""
        if self._reads % SLOW_EVERY_READS == 0:
            self._last = self._read_links()
        self._reads += 1
        return self._last

    def fan_speed_ratio(self) -> float | None:
        """nvidia-smi --query-gpu=fan.speed as 0..1 of the fan's maximum; None without a fan."""
        percent = self._calls.get("fan_speed_ratio", self._fan)
        return None if percent is None else percent / 100

    def _read_links(self) -> LinkReadings:
        get: Callable[..., int | None] = self._calls.get
        mhz = get("sm_clock_default_hertz", self._default_clock)
        return LinkReadings(
            **{field: get(field, query) for field, query in self._links.items()},
            sm_clock_default_hertz=None if mhz is None else float(mhz * _MHZ),
        )
