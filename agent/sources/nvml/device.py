"""One read of one physical GPU and its MIG instances, in SI units.

Every method here runs on a worker thread, never on two at once for one GPU (see
worker.py: a GPU that wedges is left with the stuck thread, the others read elsewhere).
NotSupported and friends become None (see calls.py); GpuFailure propagates to the source,
which marks the GPU unhealthy.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from agent.model import GpuInfo, GpuSample
from agent.sources.nvml.board import BoardReader
from agent.sources.nvml.calls import DeviceCalls, FieldLog
from agent.sources.nvml.discovery import DiscoveredGpu, MigInstance, memory_queries
from agent.sources.nvml.events import XidEvents
from agent.sources.nvml.fields import FieldReader, FieldReadings
from agent.sources.nvml.gpm import INSTANCE_METRICS, GpmReadings, GpmSampler
from agent.sources.nvml.processes import ProcessReader
from agent.sources.nvml.structs import engine_utilisation_query, out_query, temperature_v_query

_MHZ = 1_000_000


@dataclass(frozen=True)
class Timing:
    """How GPM waits: the sample gap and the clock to measure and wait it on."""

    gpm_gap_seconds: float
    monotonic: Callable[[], float]
    sleep: Callable[[float], None]


class GpuReader:
    """Reads one physical GPU (and its MIG instances) with the handles of one NVML session."""

    def __init__(self, gpu: DiscoveredGpu, field_log: FieldLog, timing: Timing) -> None:
        self.infos: list[GpuInfo] = gpu.infos
        self._gpu = gpu
        self._calls = gpu.calls
        handle = gpu.handle
        #: serialises GPM on this physical GPU (its MIG instances included)
        self._gpm_lock = threading.Lock()
        # without GPM, PCIe and NVLink traffic come from the byte counters in the batch
        self._fields = FieldReader(handle, self._calls, with_counters=not gpu.gpm_supported)
        self._board = BoardReader(handle, self._calls)
        self._events = XidEvents(handle, self._calls)
        self._gpm = (
            GpmSampler(
                lambda buffer: pynvml.nvmlGpmSampleGet(handle, buffer),
                self._calls,
                self._gpm_lock,
                timing.gpm_gap_seconds,
                timing.monotonic,
                timing.sleep,
            )
            if gpu.gpm_supported
            else None
        )
        mig = gpu.info.mig_enabled
        # on a MIG-enabled GPU the processes belong to the instances, and
        # per-process utilisation is not supported
        self._processes = None if mig else ProcessReader(handle, self._calls, with_sm_share=True)
        self._instances = [
            InstanceReader(instance, gpu, field_log, self._gpm_lock, timing)
            for instance in gpu.instances
        ]
        # the handle lives as long as this reader: each query's call is bound once
        partial, sensor = functools.partial, pynvml.NVML_TEMPERATURE_GPU
        self._memory = memory_queries(handle)
        self._utilisation = partial(pynvml.nvmlDeviceGetUtilizationRates, handle)
        self._video = VideoEngines(handle, self._calls)
        self._temperature = (
            temperature_v_query(handle, sensor),
            partial(pynvml.nvmlDeviceGetTemperature, handle, sensor),  # drivers before R565
        )
        clock, reasons = "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrentClocks{}Reasons"
        self._sm_clock = out_query(clock, handle, ctypes.c_uint(pynvml.NVML_CLOCK_SM))
        self._memory_clock = out_query(clock, handle, ctypes.c_uint(pynvml.NVML_CLOCK_MEM))
        self._throttle = (
            out_query(reasons.format("Event"), handle, out=ctypes.c_ulonglong),
            out_query(reasons.format("Throttle"), handle, out=ctypes.c_ulonglong),  # < R535
        )

    def read(self, now: float) -> list[GpuSample]:
        """This GPU's sample followed by one per MIG instance; raises GpuFailure."""
        samples = [self._read_gpu(now)]
        samples.extend(instance.read(now) for instance in self._instances)
        return samples

    def close(self) -> None:
        """Release GPM buffers and the event set (before nvmlShutdown)."""
        for instance in self._instances:
            instance.close()
        if self._gpm is not None:
            self._gpm.close()
        self._events.close()

    def _read_gpu(self, now: float) -> GpuSample:
        fields = self._fields.read()
        gpm = self._read_gpm()
        coarse = None if gpm is not None else self._coarse_utilisation()
        used, total, reserved = _memory_bytes(self._calls.get("memory", *self._memory))
        links = self._board.links()
        pcie_tx, pcie_rx, nvlink_tx, nvlink_rx = _traffic(gpm, fields)
        return GpuSample(
            timestamp=now,
            gpu_uuid=self._gpu.info.uuid,
            sm_activity=gpm.sm_activity if gpm else _percent(coarse, "gpu"),
            sm_occupancy=gpm.sm_occupancy if gpm else None,
            tensor_activity=gpm.tensor_activity if gpm else None,
            dram_activity=gpm.dram_activity if gpm else _percent(coarse, "memory"),
            activity_coarse=coarse is not None,
            power_watts=fields.power_watts,
            energy_joules=fields.energy_joules,
            temperature_celsius=self._temperature_celsius(),
            memory_temperature_celsius=fields.memory_temperature_celsius,
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_reserved_bytes=reserved,
            sm_clock_hertz=self._clock_hertz("sm_clock_hertz", self._sm_clock),
            memory_clock_hertz=self._clock_hertz("memory_clock_hertz", self._memory_clock),
            throttle_reasons=self._throttle_reasons(),
            xid_errors=self._events.poll(),
            ecc_corrected_total=fields.ecc_corrected_total,
            ecc_uncorrected_total=fields.ecc_uncorrected_total,
            remapped_rows_correctable=fields.remapped_rows_correctable,
            remapped_rows_uncorrectable=fields.remapped_rows_uncorrectable,
            remapped_rows_pending=fields.remapped_rows_pending,
            processes=self._processes.read() if self._processes else (),
            encoder_activity=self._video.encoder(),
            decoder_activity=self._video.decoder(),
            pcie_tx_bytes_per_second=pcie_tx,
            pcie_rx_bytes_per_second=pcie_rx,
            nvlink_tx_bytes_per_second=nvlink_tx,
            nvlink_rx_bytes_per_second=nvlink_rx,
            fp64_activity=gpm.fp64_activity if gpm else None,
            fp32_activity=gpm.fp32_activity if gpm else None,
            fp16_activity=gpm.fp16_activity if gpm else None,
            pcie_link_generation=links.pcie_link_generation,
            pcie_link_width=links.pcie_link_width,
            pcie_link_generation_max=links.pcie_link_generation_max,
            pcie_link_width_max=links.pcie_link_width_max,
            pcie_replays_total=fields.pcie_replays_total,
            fan_speed_ratio=self._board.fan_speed_ratio(),
            retired_pages_total=fields.retired_pages_total,
            retired_pages_pending=fields.retired_pages_pending,
            sm_clock_default_hertz=links.sm_clock_default_hertz,
        )

    def _read_gpm(self) -> GpmReadings | None:
        if self._gpm is None or not self._calls.available("gpm"):
            return None
        return self._gpm.read()

    def _coarse_utilisation(self) -> Any:
        """nvidia-smi --query-gpu=utilization.gpu,utilization.memory (%); None on MIG.

        ``gpu``: % of time one or more kernels ran; ``memory``: % of time device memory
        was read or written. Used only where GPM is unavailable (before Hopper).
        """
        if self._gpu.info.mig_enabled or (self._gpm is not None and self._calls.available("gpm")):
            return None
        return self._calls.get("utilization", self._utilisation)

    def _temperature_celsius(self) -> float | None:
        """nvidia-smi --query-gpu=temperature.gpu, °C (TemperatureV, else the call before R565)."""
        celsius = self._calls.get("temperature_celsius", *self._temperature)
        return None if celsius is None else float(celsius)

    def _clock_hertz(self, field: str, query: Callable[[], int]) -> float | None:
        """nvidia-smi --query-gpu=clocks.sm / clocks.mem, Hz (NVML answers MHz)."""
        mhz = self._calls.get(field, query)
        return None if mhz is None else float(int(mhz) * _MHZ)

    def _throttle_reasons(self) -> int | None:
        """nvidia-smi --query-gpu=clocks_event_reasons.active, a bitmask (THROTTLE_REASONS);
        the ThrottleReasons call on drivers before R535."""
        mask = self._calls.get("throttle_reasons", *self._throttle)
        return None if mask is None else int(mask)


class InstanceReader:
    """One MIG instance: its memory, its processes and (Hopper+) its GPM activity.

    Power, energy, temperature and clocks are the parent's; NVML has none per instance.
    """

    def __init__(
        self,
        instance: MigInstance,
        parent: DiscoveredGpu,
        field_log: FieldLog,
        gpm_lock: threading.Lock,
        timing: Timing,
    ) -> None:
        self._instance = instance
        self._calls = DeviceCalls(instance.info.uuid, field_log)
        self._memory = memory_queries(instance.handle)
        self._processes = ProcessReader(instance.handle, self._calls, with_sm_share=False)
        self._video = VideoEngines(instance.handle, self._calls)
        parent_handle, gi_id = parent.handle, instance.gpu_instance_id
        self._gpm = (
            GpmSampler(
                lambda buffer: pynvml.nvmlGpmMigSampleGet(parent_handle, gi_id, buffer),
                self._calls,
                gpm_lock,
                timing.gpm_gap_seconds,
                timing.monotonic,
                timing.sleep,
                INSTANCE_METRICS,
            )
            if parent.gpm_supported
            else None
        )

    def read(self, now: float) -> GpuSample:
        gpm = self._gpm.read() if self._gpm is not None else None
        used, total, reserved = _memory_bytes(self._calls.get("memory", *self._memory))
        return GpuSample(
            timestamp=now,
            gpu_uuid=self._instance.info.uuid,
            sm_activity=gpm.sm_activity if gpm else None,
            sm_occupancy=gpm.sm_occupancy if gpm else None,
            tensor_activity=gpm.tensor_activity if gpm else None,
            dram_activity=gpm.dram_activity if gpm else None,
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_reserved_bytes=reserved,
            processes=self._processes.read(),
            encoder_activity=self._video.encoder(),
            decoder_activity=self._video.decoder(),
            fp64_activity=gpm.fp64_activity if gpm else None,
            fp32_activity=gpm.fp32_activity if gpm else None,
            fp16_activity=gpm.fp16_activity if gpm else None,
        )

    def close(self) -> None:
        if self._gpm is not None:
            self._gpm.close()


class VideoEngines:
    """nvidia-smi --query-gpu=utilization.encoder,utilization.decoder as ratios 0..1.

    A GPU or MIG instance without video engines, or one NVML will not ask (MIG instances
    on most profiles), answers NotSupported: None from then on (nvml_calls' rule).
    """

    def __init__(self, handle: Any, calls: DeviceCalls) -> None:
        self._calls = calls
        self._encoder = engine_utilisation_query(handle, "nvmlDeviceGetEncoderUtilization")
        self._decoder = engine_utilisation_query(handle, "nvmlDeviceGetDecoderUtilization")

    def encoder(self) -> float | None:
        return _engine_ratio(self._calls.get("encoder_activity", self._encoder))

    def decoder(self) -> float | None:
        return _engine_ratio(self._calls.get("decoder_activity", self._decoder))


def _traffic(
    gpm: GpmReadings | None, fields: FieldReadings
) -> tuple[float | None, float | None, float | None, float | None]:
    """PCIe TX, RX and NVLink TX, RX in B/s: GPM's where GPM answers, else the counters'."""
    source: GpmReadings | FieldReadings = gpm if gpm is not None else fields
    return (
        source.pcie_tx_bytes_per_second,
        source.pcie_rx_bytes_per_second,
        source.nvlink_tx_bytes_per_second,
        source.nvlink_rx_bytes_per_second,
    )


def _engine_ratio(percent: int | None) -> float | None:
    return None if percent is None else percent / 100


def _percent(utilisation: Any, member: str) -> float | None:
    return None if utilisation is None else int(getattr(utilisation, member)) / 100


def _memory_bytes(memory: Any) -> tuple[int | None, int | None, int | None]:
    """(used, total, reserved) bytes from a v1 or v2 memory struct; None where unread
    (reserved: v2 only)."""
    if memory is None:
        return None, None, None
    reserved = getattr(memory, "reserved", None)
    return int(memory.used), int(memory.total), None if reserved is None else int(reserved)
