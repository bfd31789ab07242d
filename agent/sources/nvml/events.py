"""XID errors through an NVML event set, one set per physical GPU.

An XID is the driver's report of a GPU fault (79: fell off the bus, 48: double-bit ECC,
...); ``nvidia-smi`` has no query for them, they appear in the kernel log as
``NVRM: Xid``. The set is registered for critical XID events on the parent handle (MIG
handles cannot register) and drained at every read without blocking.
"""

from __future__ import annotations

from typing import Any

import pynvml

from agent.sources.nvml.calls import DeviceCalls
from agent.sources.nvml.structs import event_wait

#: a non-blocking wait: collect what is pending, never hold up the read
WAIT_MILLISECONDS = 0
#: bound on events taken per read, should a storm keep the set full
MAX_EVENTS_PER_READ = 256


class XidEvents:
    """Pending XID codes of one GPU."""

    def __init__(self, handle: Any, calls: DeviceCalls) -> None:
        self._handle = handle
        self._calls = calls
        self._event_set: Any = None
        self._wait: Any = None

    def poll(self) -> tuple[int, ...]:
        """XID codes raised since the previous poll, oldest first; () when unsupported."""
        if self._event_set is None and not self._open():
            return ()
        codes: list[int] = []
        for _ in range(MAX_EVENTS_PER_READ):
            try:
                data = self._wait()
            except pynvml.NVMLError as err:
                self._calls.failed("xid_errors", int(err.value))
                break
            if data is None:
                break  # nothing (more) pending
            if data.eventType & pynvml.nvmlEventTypeXidCriticalError:
                codes.append(int(data.eventData))
        return tuple(codes)

    def close(self) -> None:
        if self._event_set is not None:
            event_set, self._event_set, self._wait = self._event_set, None, None
            self._calls.get("xid_event_set", lambda: pynvml.nvmlEventSetFree(event_set))

    def _open(self) -> bool:
        if not self._calls.available("xid_errors"):
            return False
        supported = self._calls.get(
            "xid_errors", lambda: pynvml.nvmlDeviceGetSupportedEventTypes(self._handle)
        )
        if supported is None:
            return False
        if not supported & pynvml.nvmlEventTypeXidCriticalError:
            self._calls.failed("xid_errors", pynvml.NVML_ERROR_NOT_SUPPORTED)
            return False
        event_set = self._calls.get("xid_errors", pynvml.nvmlEventSetCreate)
        if event_set is None:
            return False

        def register() -> bool:
            mask = pynvml.nvmlEventTypeXidCriticalError
            pynvml.nvmlDeviceRegisterEvents(self._handle, mask, event_set)
            return True

        if self._calls.get("xid_errors", register) is None:
            self._calls.get("xid_event_set", lambda: pynvml.nvmlEventSetFree(event_set))
            return False
        self._event_set = event_set
        self._wait = event_wait(event_set, WAIT_MILLISECONDS)
        return True
