"""Plain ctypes twins of the binding's request structs, allocated once per GPU and reused.

nvidia-ml-py's structs derive from ``_PrintableStructure``, whose Python-level
``__getattribute__`` and ``__setattr__`` run on every member access: decoding one field
value batch and one GPM metrics request took ~30 such calls per GPU and read. A twin has
the binding's own ``_fields_`` (so the layout follows the binding, checked by size) on a
plain ``ctypes.Structure``, whose members are C descriptors. The C library sees the
same bytes.
"""

from __future__ import annotations

import ctypes
import functools
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
