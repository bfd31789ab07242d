"""Fake NVML symbols for the board: PCIe link, fan and default applications clock (see
nvml_symbols for the rules; MIG handles answer none of them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pynvml as N

from tests.fakes.nvml_symbols import SUCCESS, Fail, scalar

if TYPE_CHECKING:
    from tests.fakes.nvml_lib import FakeNvml as _Base
else:
    _Base = object


class BoardSymbols(_Base):
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetCurrPcieLinkGeneration")
        out._obj.value = gpu.spec.pcie_link_generation
        return SUCCESS

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetCurrPcieLinkWidth")
        out._obj.value = gpu.spec.pcie_link_width
        return SUCCESS

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
        out._obj.value = gpu.spec.pcie_link_generation_max
        return SUCCESS

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetMaxPcieLinkWidth")
        out._obj.value = gpu.spec.pcie_link_width_max
        return SUCCESS

    def nvmlDeviceGetFanSpeed(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetFanSpeed")
        out._obj.value = gpu.spec.fan_speed_percent
        return SUCCESS

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: Any, clock: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetDefaultApplicationsClock")
        if scalar(clock) not in (N.NVML_CLOCK_SM, N.NVML_CLOCK_GRAPHICS):
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)  # only the SM clock modelled
        out._obj.value = gpu.spec.sm_clock_default_mhz
        return SUCCESS
