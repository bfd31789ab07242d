"""The NVML GPU source: every GPU and MIG instance of this node, read through nvidia-ml-py.

Only agent/nvml*.py import ``pynvml`` (the module of the ``nvidia-ml-py`` distribution).

- NVML is initialised once and its handles cached until a re-initialisation.
- The physical GPUs are read one after another on a worker thread (see worker.py); a
  GPU whose read misses its deadline (``source.nvml_call_timeout_seconds``) gets an
  unhealthy sample with ``error="timeout"`` and the agent moves on: the stuck call is
  abandoned and the other GPUs are read on other threads.
- A GPU that NVML reports lost (or an Unknown/ResetRequired error) gets unhealthy
  samples; the others keep reporting. NVML is then shut down and initialised again, with
  exponential backoff, and every handle is looked up afresh.
- A value the GPU cannot give is ``None``, logged once per GPU and field and counted in
  ``AgentStats.record_field_error``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

import pynvml

from agent.config import SourceSettings
from agent.model import GpuInfo, GpuSample
from agent.sources.interface import SourceError
from agent.sources.nvml.calls import FATAL_CODES, FieldLog, GpuFailure
from agent.sources.nvml.device import GpuReader, Timing
from agent.sources.nvml.discovery import SystemInfo, discover_gpu, read_system
from agent.sources.nvml.worker import CallTimeout, DeadlineWorker, GpuWorkers
from agent.stats import AgentStats

log = logging.getLogger("agent.sources.nvml.source")

REINIT_INITIAL_BACKOFF_SECONDS = 1.0
REINIT_MAX_BACKOFF_SECONDS = 60.0

_INIT_HINTS = {
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 not found: is the NVIDIA driver"
    " installed and the agent started with the NVIDIA container runtime?",
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded",
    pynvml.NVML_ERROR_NO_PERMISSION: "no permission to open /dev/nvidia*",
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "the driver was upgraded without reloading"
    " the kernel module; reboot the node or reload the driver",
}


class _GpuState:
    """What the source knows about one physical GPU across NVML sessions."""

    def __init__(self, infos: list[GpuInfo], reader: GpuReader | None) -> None:
        self.infos = infos
        self.reader = reader
        #: why the GPU is unusable until the next re-initialisation; None when healthy
        self.lost: str | None = None

    @property
    def index(self) -> int:
        return self.infos[0].index

    def unhealthy(self, now: float, reason: str) -> list[GpuSample]:
        return [
            GpuSample(timestamp=now, gpu_uuid=info.uuid, healthy=False, error=reason)
            for info in self.infos
        ]


class NvmlSource:
    """GpuSource over NVML. ``monotonic`` and ``sleep`` time the GPM sample gap and
    the re-initialisation backoff; tests pass a fake clock."""

    def __init__(
        self,
        settings: SourceSettings,
        stats: AgentStats | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._timeout_seconds = settings.nvml_call_timeout_seconds
        self._timing = Timing(settings.gpm_sample_gap_seconds, monotonic, sleep)
        self._stats = stats if stats is not None else AgentStats()
        self._field_log = FieldLog(self._stats)
        self._monotonic = monotonic
        self._system = DeadlineWorker("nvml-system")
        self._workers = GpuWorkers("nvml-gpu")
        self._gpus: dict[str, _GpuState] = {}
        self._started = False
        self._backoff_seconds = REINIT_INITIAL_BACKOFF_SECONDS
        self._reinit_at: float | None = None
        self._lock = threading.Lock()

    def discover(self) -> list[GpuInfo]:
        """Every GPU followed by its MIG instances, in index order.

        GPUs that were seen and are now lost stay listed (their samples say unhealthy).
        Raises SourceError when NVML cannot be started at all.
        """
        with self._lock:
            self._ensure_started()
            return [info for state in self._states() for info in state.infos]

    def read(self, now: float) -> list[GpuSample]:
        """One sample per GPU and MIG instance, timestamped ``now`` (Unix seconds).

        The read itself (count, wall time, unhealthy GPUs) is recorded by the Sampler,
        which times every source alike; this source records only its field errors.
        """
        with self._lock:
            self._ensure_started()
            self._reinit_if_due()
            return self._read_all(now)

    def close(self) -> None:
        """Free GPM buffers and event sets, shut NVML down, let the worker threads end."""
        with self._lock:
            if self._started:
                self._end_session()
                self._started = False
            self._system.stop()
            self._workers.stop()

    # -- reading ----------------------------------------------------------------------

    def _states(self) -> list[_GpuState]:
        return sorted(self._gpus.values(), key=lambda state: state.index)

    def _read_all(self, now: float) -> list[GpuSample]:
        jobs = {
            state.index: functools.partial(state.reader.read, now)
            for state in self._states()
            if state.lost is None and state.reader is not None
        }
        results = self._workers.run(jobs, self._timeout_seconds)
        samples: list[GpuSample] = []
        for state in self._states():
            result = results.get(state.index)
            if state.lost is not None:
                samples.extend(state.unhealthy(now, state.lost))
            elif isinstance(result, list):
                samples.extend(result)
            elif result is not None:
                samples.extend(state.unhealthy(now, self._failure(state, result)))
        return samples

    def _failure(self, state: _GpuState, err: Exception) -> str:
        """The error text for a failed read; a lost GPU also schedules a re-init."""
        if isinstance(err, CallTimeout):
            log.warning("GPU %s: read timed out (%s)", state.infos[0].uuid, err)
            return "timeout"
        if isinstance(err, GpuFailure) or _is_fatal(err):
            self._mark_lost(state, str(err))
            return state.lost or str(err)
        log.error("GPU %s: read failed", state.infos[0].uuid, exc_info=err)
        self._stats.record_field_error(state.infos[0].uuid, "read")
        return f"{type(err).__name__}: {err}"

    def _mark_lost(self, state: _GpuState, reason: str) -> None:
        log.error(
            "GPU %s is unusable (%s); NVML will be re-initialised", state.infos[0].uuid, reason
        )
        state.lost = reason
        self._stats.record_field_error(state.infos[0].uuid, "lost")
        if self._reinit_at is None:
            self._reinit_at = self._monotonic() + self._backoff_seconds

    # -- NVML sessions ----------------------------------------------------------------

    def _ensure_started(self) -> None:
        if not self._started:
            self._start_session()
            self._started = True

    def _start_session(self) -> None:
        """nvmlInit, then discover every GPU in parallel; raises SourceError."""
        try:
            system = self._system.call(_init_and_count, self._timeout_seconds)
        except CallTimeout as err:
            raise SourceError(f"NVML did not start: {err}") from err
        except pynvml.NVMLError as err:
            hint = _INIT_HINTS.get(int(err.value), "")
            raise SourceError(f"NVML did not start: {err}. {hint}".strip()) from err
        self._discover_all(system)

    def _discover_all(self, system: SystemInfo) -> None:
        jobs = {
            index: functools.partial(self._new_reader, index, system)
            for index in range(system.gpu_count)
        }
        found: set[str] = set()
        for index, result in self._workers.run(jobs, self._timeout_seconds).items():
            if isinstance(result, GpuReader):
                uuid = result.infos[0].uuid
                found.add(uuid)
                self._gpus[uuid] = _GpuState(result.infos, result)
            else:
                self._index_unavailable(index, result)
        for uuid, state in self._gpus.items():
            if uuid not in found and state.lost is None:
                self._mark_lost(state, "not found after NVML re-initialisation")

    def _new_reader(self, index: int, system: SystemInfo) -> GpuReader:
        return GpuReader(
            discover_gpu(index, system, self._field_log), self._field_log, self._timing
        )

    def _index_unavailable(self, index: int, err: Exception) -> None:
        known = [state for state in self._gpus.values() if state.index == index]
        reason = "timeout" if isinstance(err, CallTimeout) else str(err)
        if known:
            known[0].reader = None
            if known[0].lost is None:
                self._mark_lost(known[0], reason)
            else:
                known[0].lost = reason
        else:
            log.error("GPU at index %d cannot be read: %s", index, reason)

    def _reinit_if_due(self) -> None:
        if self._reinit_at is None or self._monotonic() < self._reinit_at:
            return
        lost = [state.infos[0].uuid for state in self._gpus.values() if state.lost]
        log.warning("re-initialising NVML (lost: %s)", ", ".join(lost) or "none")
        for state in self._gpus.values():
            state.lost = None
        self._reinit_at = None
        try:
            self._end_session()
            self._start_session()
        except SourceError as err:
            log.error("NVML re-initialisation failed: %s", err)
            for state in self._gpus.values():
                state.lost, state.reader = str(err), None
        self._after_reinit()

    def _after_reinit(self) -> None:
        if any(state.lost for state in self._gpus.values()):
            self._backoff_seconds = min(self._backoff_seconds * 2, REINIT_MAX_BACKOFF_SECONDS)
            self._reinit_at = self._monotonic() + self._backoff_seconds
        else:
            self._backoff_seconds = REINIT_INITIAL_BACKOFF_SECONDS

    def _end_session(self) -> None:
        """Release per-GPU resources and shut NVML down; old handles die here."""
        readers = {s.index: s.reader for s in self._gpus.values() if s.reader is not None}
        self._workers.run({i: r.close for i, r in readers.items()}, self._timeout_seconds)
        for state in self._gpus.values():
            state.reader = None
        try:
            self._system.call(pynvml.nvmlShutdown, self._timeout_seconds)
        except (CallTimeout, pynvml.NVMLError) as err:
            log.warning("nvmlShutdown failed: %s", err)


def _init_and_count() -> SystemInfo:
    pynvml.nvmlInit()
    return read_system()


def _is_fatal(err: Exception) -> bool:
    return isinstance(err, pynvml.NVMLError) and int(err.value) in FATAL_CODES
