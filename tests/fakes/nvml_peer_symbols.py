"""Fake NVML symbols the agent never calls but peer tools do (bench/agent_peers.py).

gpustat and nvitop ask for the device index, graphics processes, fan speed and video
engine utilisation; without these symbols gpustat stops at its first GPU. Answers are
what an SXM data-centre GPU gives: no fan to report (NotSupported), no graphics
processes, idle video engines (0 % over a 167 ms sampling period).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pynvml as N

from tests.fakes.nvml_symbols import SUCCESS, Fail

if TYPE_CHECKING:
    from tests.fakes.nvml_lib import FakeNvml as _Base
else:
    _Base = object

#: nvidia-smi's video engine sampling period on Hopper, µs
VIDEO_SAMPLING_PERIOD_MICROSECONDS = 167_000


class PeerSymbols(_Base):
    def nvmlDeviceGetIndex(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetIndex")
        out._obj.value = gpu.index
        return SUCCESS

    def nvmlDeviceGetFanSpeed(self, handle: Any, out: Any) -> int:
        self._device(handle, "nvmlDeviceGetFanSpeed")
        raise Fail(N.NVML_ERROR_NOT_SUPPORTED)  # SXM boards are cooled by the chassis

    def nvmlDeviceGetEncoderUtilization(self, handle: Any, util: Any, period: Any) -> int:
        return self._video_engine(handle, util, period, "nvmlDeviceGetEncoderUtilization")

    def nvmlDeviceGetDecoderUtilization(self, handle: Any, util: Any, period: Any) -> int:
        return self._video_engine(handle, util, period, "nvmlDeviceGetDecoderUtilization")

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: Any, count: Any, infos: Any) -> int:
        return self._no_graphics(handle, count, "nvmlDeviceGetGraphicsRunningProcesses_v3")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any, count: Any, infos: Any) -> int:
        return self._no_graphics(handle, count, "nvmlDeviceGetGraphicsRunningProcesses_v2")

    def _video_engine(self, handle: Any, util: Any, period: Any, symbol: str) -> int:
        self._device(handle, symbol)
        util._obj.value = 0
        period._obj.value = VIDEO_SAMPLING_PERIOD_MICROSECONDS
        return SUCCESS

    def _no_graphics(self, handle: Any, count: Any, symbol: str) -> int:
        self._device(handle, symbol)
        count._obj.value = 0
        return SUCCESS
