"""Power, energy, HBM temperature, ECC and row remapping in one nvmlDeviceGetFieldValues call.

NVML serves every field of a batch from as few driver calls as it can, so one batch per
read is the cheap path. A call can succeed while single fields fail: each element carries
its own return code. A field this GPU does not support is dropped from later batches and
its dedicated call (e.g. nvmlDeviceGetPowerUsage) is used instead where one exists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import pynvml

from agent.sources.nvml.calls import PERMANENT_CODES, DeviceCalls
from agent.sources.nvml.structs import FieldValue, get_field_values

#: c_nvmlValue_t union member for each nvmlValueType_t
_UNION_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

#: our field name -> NVML field id (or (id, scope))
FIELD_IDS: dict[str, int | tuple[int, int]] = {
    "power_watts": (pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_POWER_SCOPE_GPU),
    "energy_joules": pynvml.NVML_FI_DEV_ENERGY,
    "memory_temperature_celsius": pynvml.NVML_FI_DEV_MEMORY_TEMP,
    "ecc_corrected_total": pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL,
    "ecc_uncorrected_total": pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
    "remapped_rows_correctable": pynvml.NVML_FI_DEV_REMAPPED_COR,
    "remapped_rows_uncorrectable": pynvml.NVML_FI_DEV_REMAPPED_UNC,
    "remapped_rows_pending": pynvml.NVML_FI_DEV_REMAPPED_PENDING,
}

_REMAPPED = ("remapped_rows_correctable", "remapped_rows_uncorrectable", "remapped_rows_pending")
#: fields with an older dedicated call; the HBM temperature has none
_HAS_DEDICATED_CALL = frozenset(FIELD_IDS) - {"memory_temperature_celsius"}


class FieldReadings(NamedTuple):
    """One GPU's field values in SI units; None where the GPU cannot say.

    A NamedTuple, not a frozen dataclass: built once per GPU and read, and a frozen
    dataclass pays an object.__setattr__ per field."""

    #: instantaneous board power, W (nvidia-smi --query-gpu=power.draw.instant)
    power_watts: float | None = None
    #: energy since driver load, J (no nvidia-smi query; NVML total energy counter)
    energy_joules: float | None = None
    #: HBM temperature, °C (nvidia-smi --query-gpu=temperature.memory)
    memory_temperature_celsius: float | None = None
    #: volatile ECC counts since driver load
    #: (nvidia-smi --query-gpu=ecc.errors.corrected.volatile.total, ...uncorrected...)
    ecc_corrected_total: int | None = None
    ecc_uncorrected_total: int | None = None
    #: row remapping, Ampere+ (nvidia-smi --query-remapped-rows=remapped_rows.correctable,
    #: remapped_rows.uncorrectable,remapped_rows.pending)
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None


def field_value(element: Any) -> int | float:
    """The number in one c_nvmlFieldValue_t, read through the member its valueType names."""
    number: int | float = getattr(element.value, _UNION_MEMBERS[element.valueType])
    return number


class FieldReader:
    """Reads one GPU's field batch, falling back to the dedicated calls field by field."""

    def __init__(self, handle: Any, calls: DeviceCalls) -> None:
        self._handle = handle
        self._calls = calls
        #: fields still asked for in the batch (a field the GPU rejects is dropped)
        self._batch = dict(FIELD_IDS)
        #: the request for ``_batch``, ids written once; rebuilt when a field is dropped
        self._names: list[str] = []
        self._request: Any = None
        self._get_values: Callable[[], Any] = lambda: None

    def read(self) -> FieldReadings:
        values = self._read_batch()
        if len(self._batch) < len(FIELD_IDS):  # only a field dropped from the batch falls back
            values = {name: values.get(name) for name in FIELD_IDS}
            self._fill_fallbacks(values)
        value = values.get
        return FieldReadings(
            power_watts=_scaled(value("power_watts"), 1000),
            energy_joules=_scaled(value("energy_joules"), 1000),
            memory_temperature_celsius=_scaled(value("memory_temperature_celsius"), 1),
            ecc_corrected_total=_integer(value("ecc_corrected_total")),
            ecc_uncorrected_total=_integer(value("ecc_uncorrected_total")),
            remapped_rows_correctable=_integer(value("remapped_rows_correctable")),
            remapped_rows_uncorrectable=_integer(value("remapped_rows_uncorrectable")),
            remapped_rows_pending=None
            if value("remapped_rows_pending") is None
            else bool(value("remapped_rows_pending")),
        )

    def _read_batch(self) -> dict[str, int | float | None]:
        if not self._batch:
            return {}
        if self._request is None:
            self._prepare_request()
        answer = self._calls.get("field_values", self._get_values)
        if answer is None:
            self._batch.clear()
            return {}
        return self._decode(answer)

    def _prepare_request(self) -> None:
        self._names = list(self._batch)
        self._request = (FieldValue * len(self._names))()
        self._get_values = functools.partial(get_field_values, self._handle, self._request)
        for element, name in zip(self._request, self._names, strict=True):
            field_id = self._batch[name]
            element.fieldId, element.scopeId = (
                field_id if isinstance(field_id, tuple) else (field_id, 0)
            )

    def _decode(self, answer: Any) -> dict[str, int | float | None]:
        values: dict[str, int | float | None] = {}
        for name, element in zip(self._names, answer, strict=True):
            code = element.nvmlReturn
            if code == pynvml.NVML_SUCCESS:
                values[name] = field_value(element)
            elif code in PERMANENT_CODES:
                del self._batch[name]  # its dedicated call (if any) answers from now on
                self._request = None
                if name not in _HAS_DEDICATED_CALL:
                    self._calls.failed(name, code)
            else:
                self._calls.failed(name, code)
        return values

    def _fill_fallbacks(self, values: dict[str, int | float | None]) -> None:
        """Ask the dedicated call for each field the batch did not answer."""
        handle = self._handle
        single: dict[str, Callable[[], int]] = {
            "power_watts": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
            "energy_joules": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
            "ecc_corrected_total": lambda: _volatile_ecc(handle, corrected=True),
            "ecc_uncorrected_total": lambda: _volatile_ecc(handle, corrected=False),
        }
        for name, call in single.items():
            if values[name] is None and name not in self._batch:
                values[name] = self._calls.get(name, call)
        if any(values[name] is None and name not in self._batch for name in _REMAPPED):
            rows = self._calls.get(
                "remapped_rows", lambda: pynvml.nvmlDeviceGetRemappedRows(handle)
            )
            for name, value in zip(_REMAPPED, rows or (None, None, None), strict=False):
                values[name] = value


def _volatile_ecc(handle: Any, corrected: bool) -> int:
    kind = (
        pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        if corrected
        else pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    )
    return int(pynvml.nvmlDeviceGetTotalEccErrors(handle, kind, pynvml.NVML_VOLATILE_ECC))


def _scaled(value: int | float | None, per_unit: int) -> float | None:
    """Vendor units to SI: divide by ``per_unit`` (mW -> W: 1000). Division, not
    multiplication by 0.001, keeps integral vendor values exact to the last bit."""
    return None if value is None else value / per_unit


def _integer(value: int | float | None) -> int | None:
    return None if value is None else int(value)
