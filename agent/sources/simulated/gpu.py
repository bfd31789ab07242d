"""One simulated GPU: activity, power and the exact energy integral on the segment grid.

Power is piecewise constant per segment, so the energy from the epoch to any instant is a
finite sum. Cumulative energy is cached at block boundaries (every ``BLOCK_SEGMENTS``
segments) and at a read cursor, always accumulated in the same order, so the counter in the
samples and the ground-truth integrals are the same floating-point numbers.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from agent.model import GpuInfo, GpuSample, ProcessSample
from agent.sources.simulated.hardware import GpuModel, board_power_watts, temperature_celsius
from agent.sources.simulated.pathology import falls_off_bus, gpu_signals, pcie_link
from agent.sources.simulated.workloads import (
    SEGMENT_SECONDS,
    ActivityKind,
    SimJob,
    segment_activity,
    unit,
)

BLOCK_SEGMENTS = 64
_GPU_IDLE_REASON = 0x1


class SimulatedGpu:
    """A simulated board: its model, gain, jobs over time and energy counter offset."""

    def __init__(
        self,
        info: GpuInfo,
        model: GpuModel,
        *,
        gain: float,
        key: int,
        epoch: float,
        jobs: tuple[SimJob, ...],
    ) -> None:
        self.info = info
        self.model = model
        self.gain = gain
        self.key = key
        self.epoch = epoch
        self.jobs = jobs
        #: the NVML counter's value at the epoch (joules since a driver load days earlier)
        self.counter_offset_joules = 1.0e7 + unit(key, 7) * 4.0e8
        self._pids = {
            job.workload.key: 1000 + int(unit(key ^ i, 8) * 3_000_000) for i, job in enumerate(jobs)
        }
        self._blocks: dict[int, float] = {0: 0.0}
        self._min_block = 0
        self._max_block = 0
        self._cursor = (0, 0.0)
        self._lock = threading.Lock()

    def reschedule(self, jobs: tuple[SimJob, ...], since: float) -> None:
        """The board's jobs from ``since`` on (a release ends one, a scheduler places
        another): ``since`` must not be before the newest time read, whose energy is
        already integrated with the old schedule."""
        with self._lock:
            if self.segment_at(since) < self._cursor[0]:
                raise ValueError(f"reschedule at {since}: before the newest time read")
            self.jobs = jobs
            for i, job in enumerate(jobs):
                pid = 1000 + int(unit(self.key ^ (i + 97), 8) * 3_000_000)
                self._pids.setdefault(job.workload.key, pid)

    # -- the segment grid -------------------------------------------------------------

    def segment_at(self, time_unix: float) -> int:
        return math.floor((time_unix - self.epoch) / SEGMENT_SECONDS)

    def segment_start(self, segment: int) -> float:
        return self.epoch + segment * SEGMENT_SECONDS

    def job_at(self, time_unix: float) -> SimJob | None:
        for job in self.jobs:
            if job.holds_at(time_unix):
                return job
        return None

    def state(self, segment: int) -> tuple[SimJob | None, float, float, float]:
        """(job holding the GPU, sm_activity, dram_activity, power_watts) during ``segment``."""
        start = self.epoch + segment * SEGMENT_SECONDS
        job = self.job_at(start)
        if job is None:
            sm = dram = 0.0
        else:
            sm, dram = segment_activity(job.pattern, self.key, segment, start, self.lags(job))
        power = board_power_watts(self.model, self.gain, sm, dram, context=job is not None)
        return job, sm, dram, power

    def lags(self, job: SimJob) -> bool:
        """Whether this GPU is the straggler of ``job`` (a STRAGGLER job's last GPU)."""
        return job.kind is ActivityKind.STRAGGLER and self.info.index == job.gpu_indexes[-1]

    def activity(self, segment: int) -> tuple[float, float]:
        """True (sm_activity, dram_activity) during ``segment``; (0, 0) when free."""
        _, sm, dram, _ = self.state(segment)
        return sm, dram

    def power_watts(self, segment: int) -> float:
        return self.state(segment)[3]

    # -- exact energy ---------------------------------------------------------------------

    def energy_since_epoch_joules(self, time_unix: float) -> float:
        """Exact integral of power from the epoch to ``time_unix`` (negative before it)."""
        segment = self.segment_at(time_unix)
        partial = time_unix - self.segment_start(segment)
        return self._cumulative(segment) + self.power_watts(segment) * partial

    def counter_joules(self, time_unix: float) -> float:
        """The NVML-style total energy counter at ``time_unix``."""
        return self.counter_offset_joules + self.energy_since_epoch_joules(time_unix)

    def _cumulative(self, segment: int) -> float:
        with self._lock:
            return self._cumulative_locked(segment)

    def _cumulative_locked(self, segment: int) -> float:
        block = segment // BLOCK_SEGMENTS
        first = block * BLOCK_SEGMENTS
        cursor_segment, cursor_joules = self._cursor
        if first <= cursor_segment <= segment:
            k, acc = cursor_segment, cursor_joules
        else:
            k, acc = first, self._block_start(block)
        for j in range(k, segment):
            acc += self.power_watts(j) * SEGMENT_SECONDS
        self._cursor = (segment, acc)
        return acc

    def _block_start(self, block: int) -> float:
        while block > self._max_block:
            acc = self._blocks[self._max_block]
            first = self._max_block * BLOCK_SEGMENTS
            for j in range(first, first + BLOCK_SEGMENTS):
                acc += self.power_watts(j) * SEGMENT_SECONDS
            self._max_block += 1
            self._blocks[self._max_block] = acc
        while block < self._min_block:
            below = self._min_block - 1
            total = 0.0
            for j in range(below * BLOCK_SEGMENTS, self._min_block * BLOCK_SEGMENTS):
                total += self.power_watts(j) * SEGMENT_SECONDS
            self._blocks[below] = self._blocks[self._min_block] - total
            self._min_block = below
        return self._blocks[block]

    # -- idle ground truth --------------------------------------------------------------------

    def idle_intervals(
        self, t0: float, t1: float, threshold: float = 0.01
    ) -> list[tuple[float, float]]:
        """Maximal intervals within [t0, t1] where SM and DRAM activity are both < threshold."""
        if t1 <= t0:
            return []

        def idle(segment: int) -> bool:
            sm, dram = self.activity(segment)
            return sm < threshold and dram < threshold

        return self.intervals_where(t0, t1, idle)

    def intervals_where(
        self, t0: float, t1: float, holds: Callable[[int], bool]
    ) -> list[tuple[float, float]]:
        """Maximal intervals within [t0, t1] made of the segments for which ``holds`` is true."""
        intervals: list[tuple[float, float]] = []
        for segment in range(self.segment_at(t0), self.segment_at(t1) + 1):
            if not holds(segment):
                continue
            start = max(t0, self.segment_start(segment))
            end = min(t1, self.segment_start(segment + 1))
            if end <= start:
                continue
            if intervals and intervals[-1][1] == start:
                intervals[-1] = (intervals[-1][0], end)
            else:
                intervals.append((start, end))
        return intervals

    # -- the reading ----------------------------------------------------------------------------

    def sample(self, now: float) -> GpuSample:
        """What NVML would report at ``now``: instant power, counter, activity, processes."""
        segment = self.segment_at(now)
        job, sm, dram, power = self.state(segment)
        if falls_off_bus(job):
            return self._lost(now, job)
        busy = sm > 0.0 or dram > 0.0
        memory_used = int(self.model.memory_total_bytes * job.pattern.memory_fraction) if job else 0
        temperature = temperature_celsius(self.model, power)
        gpm = self.model.has_gpm
        signals = gpu_signals(job, self.model, self.key, segment, sm, bool(job and self.lags(job)))
        return GpuSample(
            timestamp=now,
            gpu_uuid=self.info.uuid,
            # without GPM: NVML utilization.gpu/.memory, whole percent
            sm_activity=sm if gpm else round(sm * 100.0) / 100.0,
            dram_activity=dram if gpm else round(dram * 100.0) / 100.0,
            sm_occupancy=0.55 * sm if gpm else None,
            tensor_activity=signals.tensor_activity if gpm else None,
            activity_coarse=not gpm,
            power_watts=round(power, 3),
            energy_joules=self.counter_joules(now),
            temperature_celsius=temperature,
            memory_temperature_celsius=temperature + 4.0 if self.model.has_hbm else None,
            memory_used_bytes=memory_used,
            memory_total_bytes=self.model.memory_total_bytes,
            sm_clock_hertz=self._sm_clock_hertz(busy or job is not None) * signals.clock_ratio,
            throttle_reasons=signals.throttle_reasons | (0 if busy else _GPU_IDLE_REASON),
            xid_errors=signals.xid_errors,
            ecc_corrected_total=0 if self.model.has_hbm else None,
            ecc_uncorrected_total=signals.ecc_uncorrected_total if self.model.has_hbm else None,
            processes=self._processes(job, memory_used, sm),
            workloads=(job.workload,) if job else (),
            # the simulated jobs train and serve models: no video to encode or decode
            encoder_activity=0.0,
            decoder_activity=0.0,
            # the issue-24 fields: GPM pipes on Hopper+, PCIe and NVLink where they exist
            pcie_tx_bytes_per_second=signals.pcie_tx_bytes_per_second,
            pcie_rx_bytes_per_second=signals.pcie_rx_bytes_per_second,
            nvlink_tx_bytes_per_second=signals.nvlink_tx_bytes_per_second,
            nvlink_rx_bytes_per_second=signals.nvlink_rx_bytes_per_second,
            fp64_activity=0.0 if gpm else None,
            fp32_activity=signals.fp32_activity if gpm else None,
            fp16_activity=signals.fp16_activity if gpm else None,
            pcie_link_generation=signals.pcie_link_generation,
            pcie_link_width=signals.pcie_link_width,
            pcie_link_generation_max=pcie_link(self.model)[0],
            pcie_link_width_max=pcie_link(self.model)[1],
            pcie_replays_total=0,
            # every simulated board is passively cooled (SXM, or a datacenter PCIe card)
            fan_speed_ratio=None,
            # Turing retires pages; Ampere and newer remap rows instead
            retired_pages_total=0 if self.model.architecture == "turing" else None,
            retired_pages_pending=False if self.model.architecture == "turing" else None,
            sm_clock_default_hertz=self.model.max_sm_clock_hertz,
        )

    def _lost(self, now: float, job: SimJob | None) -> GpuSample:
        """A GPU fallen off the bus: NVML answers GPU_IS_LOST; the pod still holds it."""
        return GpuSample(
            timestamp=now,
            gpu_uuid=self.info.uuid,
            healthy=False,
            error="GPU is lost (fallen off the bus)",
            xid_errors=(79,) if self.segment_at(now) % 6 == 0 else (),
            workloads=(job.workload,) if job else (),
        )

    def _sm_clock_hertz(self, raised: bool) -> float:
        return self.model.max_sm_clock_hertz if raised else self.model.idle_sm_clock_hertz

    def _processes(
        self, job: SimJob | None, memory_used: int, sm: float
    ) -> tuple[ProcessSample, ...]:
        if job is None:
            return ()
        pid = self._pids[job.workload.key]
        share = round(sm * 100.0) / 100.0
        return (
            ProcessSample(
                pid=pid,
                used_memory_bytes=memory_used,
                sm_share=share,
                name=job.process_name,
                workload=job.workload,
            ),
        )
