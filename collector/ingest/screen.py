"""The screen every decoded batch passes before it is acknowledged: one tight pass over
every field rule of ``collector/ingest/decode.py:validate_batch``, with no messages.

Most batches are clean, so the detailed walk that names each bad field (with its JSON path,
value and GPU) runs only for a batch this screen refuses. Both read the field lists below;
tests/collector/ingest/test_decode.py checks that they agree.

The value rules of samples and processes (ranges) are also msgspec constraints on
``CheckedBatch``, the type ``ingest.parse_batch`` decodes into first: msgspec checks them
while it parses, in C, so for a ``CheckedBatch`` the screen skips its per-value loops.
(JSON has no NaN or infinity, and msgspec refuses a number beyond float range, so every
float it decodes is finite.) A body that breaks a constraint is decoded again as a plain
``Batch``, and the detailed walk names each bad value with its GPU.
"""

from __future__ import annotations

import math
import operator
from math import isfinite
from typing import Annotated, Any, cast

import msgspec

from agent.model import SCHEMA_VERSION, Batch, GpuSample, ProcessSample
from collector.config import IngestSettings

RATIO_FIELDS = ("sm_activity", "sm_occupancy", "tensor_activity", "dram_activity")
NON_NEGATIVE_FIELDS = (
    "power_watts",
    "energy_joules",
    "sm_clock_hertz",
    "memory_clock_hertz",
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_reserved_bytes",
    "throttle_reasons",
    "ecc_corrected_total",
    "ecc_uncorrected_total",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
)
FINITE_FIELDS = ("temperature_celsius", "memory_temperature_celsius")
GPU_COUNT_FIELDS = ("power_limit_watts", "memory_total_bytes", "index")
_RATIOS = operator.attrgetter(*RATIO_FIELDS)
_NON_NEGATIVES = operator.attrgetter(*NON_NEGATIVE_FIELDS)
_FINITES = operator.attrgetter(*FINITE_FIELDS)
_GPU_COUNTS = operator.attrgetter(*GPU_COUNT_FIELDS)
PROCESS_NON_NEGATIVE_FIELDS = ("pid", "used_memory_bytes")
PROCESS_RATIO_FIELDS = ("sm_share",)


def _constrained(struct: type[Any], ratio: tuple[str, ...], non_negative: tuple[str, ...],
                 nested: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """``struct``'s field types with the screen's value rules as msgspec constraints."""
    out: dict[str, Any] = {}
    for f in msgspec.structs.fields(struct):
        if f.name in nested:
            out[f.name] = nested[f.name]
            continue
        if f.name not in ratio and f.name not in non_negative:
            continue
        (base,) = [t for t in getattr(f.type, "__args__", (f.type,)) if t is not type(None)]
        meta = (msgspec.Meta(ge=0.0, le=1.0) if f.name in ratio
                else msgspec.Meta(ge=0.0 if base is float else 0))  # fmt: skip
        out[f.name] = Annotated[base, meta] | None
    return out


def _checked_subclass(struct: type[Any], name: str, types_: dict[str, Any]) -> type[Any]:
    """A subclass of ``struct`` whose fields in ``types_`` are decoded with those types.
    Every field is declared again, so the subclass keeps ``struct``'s field order."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(struct):
        kind = types_.get(f.name, f.type)
        if f.required:
            fields.append((f.name, kind))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, kind, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, kind, f.default))
    return msgspec.defstruct(name, fields, bases=(struct,), module=__name__)


CheckedProcessSample = cast(type[ProcessSample], _checked_subclass(
    ProcessSample, "CheckedProcessSample",
    _constrained(ProcessSample, PROCESS_RATIO_FIELDS, PROCESS_NON_NEGATIVE_FIELDS, {}),
))  # fmt: skip
CheckedGpuSample = cast(type[GpuSample], _checked_subclass(
    GpuSample, "CheckedGpuSample",
    _constrained(GpuSample, RATIO_FIELDS, NON_NEGATIVE_FIELDS,
                 {"processes": tuple[CheckedProcessSample, ...]}),  # type: ignore[valid-type]
))  # fmt: skip
#: a Batch whose samples' (and processes') value ranges msgspec checked while decoding
CheckedBatch = cast(type[Batch], _checked_subclass(
    Batch, "CheckedBatch", {"samples": tuple[CheckedGpuSample, ...]},  # type: ignore[valid-type]
))  # fmt: skip


def batch_is_clean(batch: Batch, now: float, settings: IngestSettings) -> bool:
    """True when ``ingest.validate_batch`` would find no problem in ``batch``.

    The same rules in one tight pass with no messages; only a batch that fails here pays
    for the detailed walk that names each field.
    """
    if not (
        batch.schema_version == SCHEMA_VERSION
        and batch.node
        and batch.agent_boot_id
        and batch.seq >= 0
        and isfinite(batch.sent_at)
    ):
        return False
    known: set[str] = set()
    for info in batch.gpus:
        if not info.uuid or info.uuid in known or not _all_non_negative(_GPU_COUNTS(info)):
            return False
        known.add(info.uuid)
    oldest = now - settings.past_tolerance_seconds
    newest = now + settings.future_tolerance_seconds
    values_checked = isinstance(batch, CheckedBatch)  # the decoder checked every range
    inf = math.inf
    for sample in batch.samples:  # the hot path: inline, no calls per sample
        ts = sample.timestamp
        if sample.gpu_uuid not in known or not isfinite(ts) or not oldest <= ts <= newest:
            return False
        if values_checked:
            continue
        for v in _RATIOS(sample):
            if v is not None and not 0.0 <= v <= 1.0:  # NaN fails both comparisons
                return False
        for v in _NON_NEGATIVES(sample):
            if v is not None and not 0 <= v < inf:
                return False
        for v in _FINITES(sample):
            if v is not None and not -inf < v < inf:
                return False
        if sample.processes and not _processes_ok(sample.processes):
            return False
    return True


def _all_non_negative(values: tuple[float | None, ...]) -> bool:
    for v in values:  # noqa: SIM110 - a loop, not all(<generator>): this is the hot path
        if v is not None and not 0 <= v < math.inf:  # NaN fails both comparisons
            return False
    return True


def _processes_ok(processes: tuple[ProcessSample, ...]) -> bool:
    """The process rules (a decoded ``CheckedBatch`` never gets here: not a hot path)."""
    for p in processes:
        if not _all_non_negative(tuple(getattr(p, n) for n in PROCESS_NON_NEGATIVE_FIELDS)):
            return False
        for name in PROCESS_RATIO_FIELDS:
            v = getattr(p, name)
            if v is not None and not 0.0 <= v <= 1.0:  # NaN fails both comparisons
                return False
    return True
