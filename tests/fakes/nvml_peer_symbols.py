"""Fake NVML symbols peer tools call (bench/agent_peers.py); of these the agent calls only
the video engines'.

gpustat and nvitop ask for the device index, graphics processes, fan speed and video
engine utilisation; without these symbols gpustat stops at its first GPU. Answers are
what an SXM data-centre GPU gives: no fan to report (NotSupported), no graphics
processes, video engines as busy as the scenario says (idle by default) over a 167 ms
sampling period, NotSupported in MIG mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pynvml as N

from tests.fakes.nvml_symbols import SUCCESS, Fail

if TYPE_CHECKING:
    from tests.fakes.nvml_lib import FakeGpu
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
        gpu = self._video_engine(handle, period, "nvmlDeviceGetEncoderUtilization")
        util._obj.value = gpu.spec.encoder_utilization_percent
        return SUCCESS

    def nvmlDeviceGetDecoderUtilization(self, handle: Any, util: Any, period: Any) -> int:
        gpu = self._video_engine(handle, period, "nvmlDeviceGetDecoderUtilization")
        util._obj.value = gpu.spec.decoder_utilization_percent
        return SUCCESS

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: Any, count: Any, infos: Any) -> int:
        return self._no_graphics(handle, count, "nvmlDeviceGetGraphicsRunningProcesses_v3")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any, count: Any, infos: Any) -> int:
        return self._no_graphics(handle, count, "nvmlDeviceGetGraphicsRunningProcesses_v2")

    def _video_engine(self, handle: Any, period: Any, symbol: str) -> FakeGpu:
        gpu, _ = self._device(handle, symbol)  # a MIG instance's handle: NotSupported
        if gpu.spec.mig:
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)  # as utilisation rates in MIG mode
        period._obj.value = VIDEO_SAMPLING_PERIOD_MICROSECONDS
        return gpu

    def _no_graphics(self, handle: Any, count: Any, symbol: str) -> int:
        self._device(handle, symbol)
        count._obj.value = 0
        return SUCCESS
