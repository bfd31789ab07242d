"""Plain ctypes twins of the binding's structs, and queries that fill one, allocated once.

nvidia-ml-py's structs derive from ``_PrintableStructure``, whose Python-level
``__getattribute__`` and ``__setattr__`` run on every member access: decoding one field
value batch and one GPM metrics request took ~30 such calls per GPU and read. A twin has
the binding's own ``_fields_`` (so the layout follows the binding, checked by size) on a
plain ``ctypes.Structure``, whose members are C descriptors. The C library sees the
same bytes.

The prepared queries below do what the binding's wrapper of the same symbol does (look
the symbol up in the binding's cache, check the return code with the binding's error
classes), minus building a struct per call; a driver without the symbol raises
NVMLError_FunctionNotFound there as in the wrapper.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import pynvml


@functools.cache
def plain_twin(struct: Any) -> Any:
    """A ctypes Structure (or Union) laid out as ``struct``, nested structs twinned too."""
    base: type = ctypes.Union if issubclass(struct, ctypes.Union) else ctypes.Structure
    namespace: dict[str, Any] = {"_fields_": [_plain_field(*f) for f in struct._fields_]}
    if hasattr(struct, "_pack_"):
        namespace["_pack_"] = struct._pack_
    twin = type(f"Plain_{struct.__name__}", (base,), namespace)
    if ctypes.sizeof(twin) != ctypes.sizeof(struct):  # pragma: no cover - a binding change
        raise TypeError(f"plain twin of {struct.__name__} differs in size; update structs.py")
    return twin


def _plain_field(name: str, kind: Any, *bits: int) -> tuple[Any, ...]:
    if isinstance(kind, type) and issubclass(kind, ctypes.Structure | ctypes.Union):
        kind = plain_twin(kind)
    elif isinstance(kind, type) and issubclass(kind, ctypes.Array):
        element: Any = kind._type_
        if issubclass(element, ctypes.Structure | ctypes.Union):
            kind = plain_twin(element) * kind._length_
    return (name, kind, *bits)


#: one nvmlDeviceGetFieldValues element; NVML reads fieldId/scopeId, writes the rest
FieldValue: Any = plain_twin(pynvml.c_nvmlFieldValue_t)
#: an nvmlGpmMetricsGet request; NVML reads version, numMetrics, samples and metric ids
GpmMetricsGet: Any = plain_twin(pynvml.c_nvmlGpmMetricsGet_t)


def get_field_values(handle: Any, request: Any) -> Any:
    """nvmlDeviceGetFieldValues into a prepared ``FieldValue`` array; raises NVMLError.

    The binding's wrapper builds and fills a fresh request array on every call; this
    asks the same symbol, through the binding's own symbol cache and return check (so a
    driver without the symbol raises NVMLError_FunctionNotFound as there), with an array
    whose field ids were written once.
    """
    symbol = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetFieldValues")
    pynvml._nvmlCheckReturn(symbol(handle, ctypes.c_int32(len(request)), ctypes.byref(request)))
    return request


MemoryV2: Any = plain_twin(pynvml.c_nvmlMemory_v2_t)
#: one compute process (nvmlProcessInfo_v2_t; the binding's v3 is the same struct)
ProcessInfo: Any = plain_twin(pynvml.c_nvmlProcessInfo_v2_t)
ProcessUtilisationSample: Any = plain_twin(pynvml.c_nvmlProcessUtilizationSample_t)
#: room for this many elements in a listing's first array (grown when NVML asks for more)
LISTING_INITIAL_LENGTH = 16
TemperatureV1: Any = plain_twin(pynvml.c_nvmlTemperature_v1_t)
EventData: Any = plain_twin(pynvml.c_nvmlEventData_t)


def _call(name: str, *args: Any) -> int:
    """The binding's symbol ``name`` on ``args``: its return code, NVMLError if not SUCCESS."""
    return int(pynvml._nvmlCheckReturn(pynvml._nvmlGetFunctionPointer(name)(*args)))


def memory_v2_query(handle: Any) -> Callable[[], Any]:
    """nvmlDeviceGetMemoryInfo(handle, version=nvmlMemory_v2) into one reused struct."""
    memory = MemoryV2()
    memory.version = pynvml.nvmlMemory_v2
    reference = ctypes.byref(memory)

    def query() -> Any:
        _call("nvmlDeviceGetMemoryInfo_v2", handle, reference)
        return memory

    return query


def temperature_v_query(handle: Any, sensor: int) -> Callable[[], int]:
    """nvmlDeviceGetTemperatureV(handle, sensor) into one reused struct, °C."""
    request = TemperatureV1()
    request.version = pynvml.nvmlTemperature_v1
    request.sensorType = sensor
    reference = ctypes.byref(request)

    def query() -> int:
        _call("nvmlDeviceGetTemperatureV", handle, reference)
        return int(request.temperature)

    return query


def out_query(
    symbol: str, handle: Any, *inputs: Any, out: Any = ctypes.c_uint
) -> Callable[[], int]:
    """``symbol(handle, *inputs, &out)`` into one reused ``out``: its value (the binding's
    one-number wrappers, e.g. nvmlDeviceGetClockInfo, minus a fresh ``out`` per call)."""
    value = out()
    arguments = (handle, *inputs, ctypes.byref(value))

    def query() -> int:
        _call(symbol, *arguments)
        return int(value.value)

    return query


def processes_query(handle: Any, symbol: str) -> Callable[[], list[Any]]:
    """nvmlDeviceGetComputeRunningProcesses_v3/_v2 into a reused ProcessInfo array.

    One call where the binding makes two (size, then fill) and builds a friendly object per
    process. The elements are views of the array: read them before the next query.
    ``usedGpuMemory`` is NVML_VALUE_NOT_AVAILABLE where the driver cannot say (WDDM).
    """
    return _listing(lambda array, count: _code(symbol, handle, count, array), ProcessInfo)


def process_utilisation_query(handle: Any) -> Callable[[int], list[Any]]:
    """nvmlDeviceGetProcessUtilization(handle, samples, count, last_seen_microseconds) into
    a reused ProcessUtilisationSample array; NVMLError_NotFound when no sample is newer."""
    last_seen = ctypes.c_ulonglong()

    def call(array: Any, count: Any) -> int:
        return _code("nvmlDeviceGetProcessUtilization", handle, array, count, last_seen)

    listing = _listing(call, ProcessUtilisationSample)

    def query(last_seen_microseconds: int) -> list[Any]:
        last_seen.value = last_seen_microseconds
        return listing()

    return query


def _listing(call: Callable[[Any, Any], int], element: Any) -> Callable[[], list[Any]]:
    """NVML's "count in, count out, fill the array" protocol on one array kept between
    calls; a longer one replaces it when NVML answers INSUFFICIENT_SIZE."""
    arrays = [(element * LISTING_INITIAL_LENGTH)()]
    count = ctypes.c_uint()
    count_reference = ctypes.byref(count)

    def query() -> list[Any]:
        while True:
            array = arrays[0]
            count.value = len(array)
            code = call(array, count_reference)
            if code != pynvml.NVML_ERROR_INSUFFICIENT_SIZE or count.value <= len(array):
                break
            arrays[0] = (element * (count.value * 2 + 5))()  # room for newcomers
        pynvml._nvmlCheckReturn(code)
        elements: list[Any] = array[: count.value]
        return elements

    return query


def _code(name: str, *args: Any) -> int:
    """The return code of the binding's symbol ``name`` on ``args``."""
    return int(pynvml._nvmlGetFunctionPointer(name)(*args))


def engine_utilisation_query(handle: Any, symbol: str) -> Callable[[], int]:
    """nvmlDevice{Encoder,Decoder}Utilization(handle) into reused c_uints: the percent.

    The sampling period (µs) NVML also writes is the driver's and is not kept.
    """
    percent, period = ctypes.c_uint(), ctypes.c_uint()
    references = (ctypes.byref(percent), ctypes.byref(period))

    def query() -> int:
        _call(symbol, handle, *references)
        return percent.value

    return query


def event_wait(event_set: Any, timeout_milliseconds: int) -> Callable[[], Any]:
    """nvmlEventSetWait into one reused struct: the event, or None when none is pending.

    The binding raises NVMLError_Timeout for "nothing pending", which is the answer of
    almost every read; here it is a return code. Any other error raises NVMLError.
    """
    data = EventData()
    reference, timeout = ctypes.byref(data), ctypes.c_uint(timeout_milliseconds)

    def wait() -> Any:
        code = pynvml._nvmlGetFunctionPointer("nvmlEventSetWait_v2")(event_set, reference, timeout)
        if code == pynvml.NVML_ERROR_TIMEOUT:
            return None
        pynvml._nvmlCheckReturn(code)
        return data

    return wait
