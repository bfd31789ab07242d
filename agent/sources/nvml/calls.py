"""How the agent calls NVML for one GPU: what becomes None, what makes a GPU unhealthy.

- "This GPU or driver cannot answer" (NotSupported, FunctionNotFound, NoPermission, ...)
  makes the value ``None``; the query is not asked again for that GPU until NVML is
  re-initialised, and it is logged once per GPU and field.
- A transient error (Timeout, NotReady, ...) makes the value ``None`` for this read only.
- "The GPU is gone or NVML is broken" (GpuIsLost, Unknown, ResetRequired, ...) raises
  GpuFailure: the source marks the GPU unhealthy and re-initialises NVML.
- An older driver without a versioned symbol (FunctionNotFound, or the binding's
  NVMLLibraryMismatchError, which is not an NVMLError) moves on to the next variant.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import pynvml

from agent.stats import AgentStats

log = logging.getLogger("agent.sources.nvml.source")

T = TypeVar("T")

#: the GPU fell off the bus or NVML itself is unusable: re-initialise
FATAL_CODES = frozenset(
    {
        pynvml.NVML_ERROR_GPU_IS_LOST,
        pynvml.NVML_ERROR_UNKNOWN,
        pynvml.NVML_ERROR_RESET_REQUIRED,
        pynvml.NVML_ERROR_UNINITIALIZED,
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    }
)
#: this GPU or driver will never answer this query
PERMANENT_CODES = frozenset(
    {
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        pynvml.NVML_ERROR_NO_PERMISSION,
        pynvml.NVML_ERROR_INVALID_ARGUMENT,
        pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    }
)
#: what an older driver raises for a symbol it lacks
MISSING_SYMBOL = (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLLibraryMismatchError)


class GpuFailure(Exception):
    """NVML lost this GPU (fell off the bus, needs a reset) or NVML itself failed."""


def error_text(code: int) -> str:
    """NVML's description of a return code, e.g. ``Not Supported``."""
    return str(pynvml.NVMLError(code))


class FieldLog:
    """Logs each (GPU, field) failure once and counts every failure in AgentStats.

    Shared by all GPUs and kept across NVML re-initialisations, so a re-init does not
    repeat the log lines.
    """

    def __init__(self, stats: AgentStats) -> None:
        self._stats = stats
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def report(self, gpu_uuid: str, field: str, reason: str, permanent: bool) -> None:
        self._stats.record_field_error(gpu_uuid, field)
        with self._lock:
            if (gpu_uuid, field) in self._seen:
                return
            self._seen.add((gpu_uuid, field))
        if permanent:
            log.info("GPU %s: %s unavailable (%s); reporting None", gpu_uuid, field, reason)
        else:
            log.warning("GPU %s: reading %s failed (%s); reporting None", gpu_uuid, field, reason)


class DeviceCalls:
    """Calls NVML for one GPU or MIG instance under the rules in this module's docstring."""

    def __init__(self, gpu_uuid: str, field_log: FieldLog) -> None:
        self.gpu_uuid = gpu_uuid
        self._log = field_log
        self._unavailable: set[str] = set()
        #: index of the first call variant this driver has, per field
        self._variant: dict[str, int] = {}

    def get(self, field: str, *variants: Callable[[], T]) -> T | None:
        """The first variant's answer that this driver has; None when unavailable.

        ``variants`` are the same query newest first (e.g. ``_v3`` then ``_v2``).
        """
        if field in self._unavailable:
            return None
        # the variant that answered last time, tried directly: the loop below runs only
        # when a symbol turns out to be missing (once per field and session)
        start = self._variant.get(field, 0)
        try:
            return variants[start]()
        except MISSING_SYMBOL as err:
            self._variant[field] = start + 1
            return self._older_variant(field, variants, err)
        except pynvml.NVMLError as err:
            self.failed(field, int(err.value))
            return None

    def _older_variant(
        self, field: str, variants: tuple[Callable[[], T], ...], missing: Exception
    ) -> T | None:
        for index in range(self._variant[field], len(variants)):
            try:
                value = variants[index]()
            except MISSING_SYMBOL as err:
                missing = err
                self._variant[field] = index + 1
                continue
            except pynvml.NVMLError as err:
                self.failed(field, int(err.value))
                return None
            return value
        self._unavailable.add(field)
        self._log.report(self.gpu_uuid, field, f"not in this driver: {missing}", permanent=True)
        return None

    def failed(self, field: str, code: int) -> None:
        """Record that ``field`` failed with NVML return ``code``; raises GpuFailure if fatal."""
        if code in FATAL_CODES:
            raise GpuFailure(f"{field}: {error_text(code)}")
        permanent = code in PERMANENT_CODES
        if permanent:
            self._unavailable.add(field)
        self._log.report(self.gpu_uuid, field, error_text(code), permanent)

    def available(self, field: str) -> bool:
        """False once ``field`` is known to be unavailable on this GPU."""
        return field not in self._unavailable
