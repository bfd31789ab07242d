"""Compute processes on a GPU or MIG instance, with each one's share of SM time.

PIDs are the driver's: host PIDs on most drivers, whatever the agent's PID namespace,
so the agent runs with hostPID to map them to /proc (see research notes, §7.5).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pynvml

from agent.model import ProcessSample
from agent.sources.nvml.calls import DeviceCalls
from agent.sources.nvml.structs import process_utilisation_query, processes_query

#: usedGpuMemory of a process whose memory the driver cannot say (WDDM)
_MEMORY_NOT_AVAILABLE = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value


class ProcessReader:
    """Compute processes of one handle (nvidia-smi --query-compute-apps=pid,used_memory).

    ``with_sm_share`` asks nvmlDeviceGetProcessUtilization for each process's SM share
    (``nvidia-smi pmon`` column ``sm``); NVML does not offer it on MIG.
    """

    def __init__(self, handle: Any, calls: DeviceCalls, with_sm_share: bool) -> None:
        self._handle = handle
        self._calls = calls
        self._with_sm_share = with_sm_share
        #: NVML's CPU timestamp (µs) of the newest utilisation sample seen so far
        self._last_seen_microseconds = 0
        self._list = (
            processes_query(handle, "nvmlDeviceGetComputeRunningProcesses_v3"),
            processes_query(handle, "nvmlDeviceGetComputeRunningProcesses_v2"),  # < 510.39
        )
        self._utilisation = process_utilisation_query(handle)

    def read(self) -> tuple[ProcessSample, ...]:
        """One ProcessSample per compute process; () when the GPU cannot list them."""
        processes = self._calls.get("processes", *self._list)
        if not processes:
            return ()
        shares = self._sm_shares() if self._with_sm_share else {}
        return tuple(
            ProcessSample(
                pid=process.pid,
                # None: the driver cannot say (WDDM)
                used_memory_bytes=None
                if process.usedGpuMemory == _MEMORY_NOT_AVAILABLE
                else process.usedGpuMemory,
                sm_share=shares.get(process.pid),
            )
            for process in processes
        )

    def _sm_shares(self) -> dict[int, float]:
        """Mean SM share (0..1) per PID over the samples newer than the last read."""
        samples = self._calls.get("process_sm_share", self._utilisation_samples)
        if not samples:
            return {}
        percents: dict[int, list[int]] = defaultdict(list)
        for sample in samples:
            percents[int(sample.pid)].append(int(sample.smUtil))
            self._last_seen_microseconds = max(self._last_seen_microseconds, int(sample.timeStamp))
        return {pid: sum(values) / len(values) / 100 for pid, values in percents.items()}

    def _utilisation_samples(self) -> list[Any]:
        try:
            samples = self._utilisation(self._last_seen_microseconds)
        except pynvml.NVMLError_NotFound:
            return []  # no sample newer than the last one: nothing ran since
        return samples
