"""Power, energy, HBM temperature, ECC, row remapping, PCIe replays and (without GPM) PCIe
and NVLink byte counters in one nvmlDeviceGetFieldValues call per read.

NVML serves every field of a batch from as few driver calls as it can, so one batch per
read is the cheap path. A call can succeed while single fields fail: each element carries
its own return code. A field this GPU does not support is dropped from later batches and
its dedicated call (e.g. nvmlDeviceGetPowerUsage) is used instead where one exists.

Slow-changing fields (retired pages) ride along in every ``SLOW_EVERY_READS``-th batch
only; between those reads their last values are reported. Byte counters become rates:
the counter's delta over the delta of NVML's own timestamps (µs), None on the first read
and when a counter went backwards (it wraps, and resets on driver reload).
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
    "pcie_replays_total": pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER,
}
#: cumulative byte counters (PCIe in bytes, NVLink in KiB), read where GPM is unavailable.
#: NVLink scope: UINT_MAX asks for all links together; nvml.h also allows a link id, and
#: tools disagree on summing per-link answers (research/nvml.md 3.4) [verify on HW]
COUNTER_IDS: dict[str, int | tuple[int, int]] = {
    "pcie_tx_bytes": pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
    "pcie_rx_bytes": pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES,
    "nvlink_tx_kib": (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0xFFFFFFFF),
    "nvlink_rx_kib": (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 0xFFFFFFFF),
}
_BYTES_PER_UNIT = {
    "pcie_tx_bytes": 1,
    "pcie_rx_bytes": 1,
    "nvlink_tx_kib": 1024,
    "nvlink_rx_kib": 1024,
}
#: page retirement (Kepler to Turing; NotSupported on Ampere+, which remaps rows instead)
SLOW_IDS: dict[str, int | tuple[int, int]] = {
    "retired_pages_sbe": pynvml.NVML_FI_DEV_RETIRED_SBE,
    "retired_pages_dbe": pynvml.NVML_FI_DEV_RETIRED_DBE,
    "retired_pages_pending": pynvml.NVML_FI_DEV_RETIRED_PENDING,
}
#: slow fields are asked for in one batch out of this many
SLOW_EVERY_READS = 10

_REMAPPED = ("remapped_rows_correctable", "remapped_rows_uncorrectable", "remapped_rows_pending")
#: fields with an older dedicated call the agent falls back to
_HAS_DEDICATED_CALL = frozenset(FIELD_IDS) - {"memory_temperature_celsius", "pcie_replays_total"}


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
    #: PCIe replays since driver load (nvidia-smi -q: "Replays Since Reset")
    pcie_replays_total: int | None = None
    #: from the byte counters, B/s since the previous read (no nvidia-smi query; ``dmon -s t``)
    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    nvlink_tx_bytes_per_second: float | None = None
    nvlink_rx_bytes_per_second: float | None = None
    #: retired pages, single- plus double-bit (nvidia-smi --query-retired-pages)
    retired_pages_total: int | None = None
    retired_pages_pending: bool | None = None


def field_value(element: Any) -> int | float:
    """The number in one c_nvmlFieldValue_t, read through the member its valueType names."""
    number: int | float = getattr(element.value, _UNION_MEMBERS[element.valueType])
    return number


class FieldReader:
    """Reads one GPU's field batch, falling back to the dedicated calls field by field.

    ``with_counters``: also ask for the PCIe and NVLink byte counters (GPUs without GPM).
    """

    def __init__(self, handle: Any, calls: DeviceCalls, with_counters: bool = False) -> None:
        self._handle = handle
        self._calls = calls
        #: fields still asked for (a field the GPU rejects is dropped)
        self._batch = {**FIELD_IDS, **(COUNTER_IDS if with_counters else {}), **SLOW_IDS}
        #: per "with the slow fields", the prepared request; rebuilt when a field is dropped
        self._prepared: dict[bool, _Prepared] = {}
        self._reads = 0
        self._slow: dict[str, int | float | None] = {}
        self._rates = CounterRates()

    def read(self) -> FieldReadings:
        with_slow = self._reads % SLOW_EVERY_READS == 0
        self._reads += 1
        values = self._read_batch(with_slow)
        if with_slow:
            self._slow = {name: values.get(name) for name in SLOW_IDS}
        if any(name not in self._batch for name in _HAS_DEDICATED_CALL):
            values = {**values, **{name: values.get(name) for name in FIELD_IDS}}
            self._fill_fallbacks(values)
        value = values.get

        def rate(name: str) -> float | None:  # only a counter read now has a rate now
            return self._rates.rate(name) if name in values else None

        return FieldReadings(
            power_watts=_scaled(value("power_watts"), 1000),
            energy_joules=_scaled(value("energy_joules"), 1000),
            memory_temperature_celsius=_scaled(value("memory_temperature_celsius"), 1),
            ecc_corrected_total=_integer(value("ecc_corrected_total")),
            ecc_uncorrected_total=_integer(value("ecc_uncorrected_total")),
            remapped_rows_correctable=_integer(value("remapped_rows_correctable")),
            remapped_rows_uncorrectable=_integer(value("remapped_rows_uncorrectable")),
            remapped_rows_pending=_flag(value("remapped_rows_pending")),
            pcie_replays_total=_integer(value("pcie_replays_total")),
            pcie_tx_bytes_per_second=rate("pcie_tx_bytes"),
            pcie_rx_bytes_per_second=rate("pcie_rx_bytes"),
            nvlink_tx_bytes_per_second=rate("nvlink_tx_kib"),
            nvlink_rx_bytes_per_second=rate("nvlink_rx_kib"),
            retired_pages_total=_retired_total(self._slow),
            retired_pages_pending=_flag(self._slow.get("retired_pages_pending")),
        )

    def _read_batch(self, with_slow: bool) -> dict[str, int | float | None]:
        prepared = self._prepared.get(with_slow) or self._prepare(with_slow)
        if not prepared.names:
            return {}
        answer = self._calls.get("field_values", prepared.get_values)
        if answer is None:
            self._batch.clear()
            self._prepared.clear()
            return {}
        return self._decode(prepared.names, answer)

    def _prepare(self, with_slow: bool) -> _Prepared:
        names = [n for n in self._batch if with_slow or n not in SLOW_IDS]
        request = (FieldValue * len(names))()
        for element, name in zip(request, names, strict=True):
            field_id = self._batch[name]
            element.fieldId, element.scopeId = (
                field_id if isinstance(field_id, tuple) else (field_id, 0)
            )
        get_values = functools.partial(get_field_values, self._handle, request)
        prepared = self._prepared[with_slow] = _Prepared(names, get_values)
        return prepared

    def _decode(self, names: list[str], answer: Any) -> dict[str, int | float | None]:
        values: dict[str, int | float | None] = {}
        for name, element in zip(names, answer, strict=True):
            code = element.nvmlReturn
            if code == pynvml.NVML_SUCCESS:
                values[name] = number = field_value(element)
                if name in COUNTER_IDS:
                    self._rates.observe(name, number, element.timestamp)
            elif code in PERMANENT_CODES:
                del self._batch[name]  # its dedicated call (if any) answers from now on
                self._prepared.clear()
                if name not in _HAS_DEDICATED_CALL:
                    self._calls.failed(name, code)
            else:
                self._rates.forget(name)
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


class _Prepared(NamedTuple):
    """A request array with its field ids written once, and the call that fills it."""

    names: list[str]
    get_values: Callable[[], Any]


class CounterRates:
    """Byte counters to rates: the delta over the delta of NVML's timestamps, in B/s."""

    def __init__(self) -> None:
        self._previous: dict[str, tuple[int | float, int]] = {}
        self._rates: dict[str, float | None] = {}

    def observe(self, name: str, value: int | float, timestamp_microseconds: int) -> None:
        previous = self._previous.get(name)
        self._previous[name] = (value, timestamp_microseconds)
        rate: float | None = None
        if previous is not None and timestamp_microseconds > previous[1] and value >= previous[0]:
            seconds = (timestamp_microseconds - previous[1]) / 1_000_000
            rate = (value - previous[0]) * _BYTES_PER_UNIT[name] / seconds
        self._rates[name] = rate

    def forget(self, name: str) -> None:
        """A read failed: the next one starts afresh (a gap is not averaged over)."""
        self._previous.pop(name, None)
        self._rates.pop(name, None)

    def rate(self, name: str) -> float | None:
        return self._rates.get(name)


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


def _flag(value: int | float | None) -> bool | None:
    return None if value is None else bool(value)


def _retired_total(slow: dict[str, int | float | None]) -> int | None:
    single, double = slow.get("retired_pages_sbe"), slow.get("retired_pages_dbe")
    return None if single is None or double is None else int(single) + int(double)
