"""What is wrong with a decoded batch: the walk ``decode.validate_batch`` runs.

It holds a batch to the rules that involve more than one value (timestamps against the
collector's clock and the node's, a GPU listed twice, a sample of an unlisted GPU, a
power past what its GPU can draw) and, for a batch that did not come through the checked
decoder, to every value rule of collector/ingest/rules.py, naming each problem by JSON
path, value and GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from collector.analysis.physical import MAX_POWER_WATTS, POWER_MARGIN, UNRATED_MAX_WATTS
from collector.backend import IngestError, RejectReason
from collector.config import IngestSettings
from collector.ingest.rules import (
    BATCH_RULES,
    FINITE,
    GPU_RULES,
    HOST_RULES,
    PROCESS_RULES,
    SAMPLE_RULES,
    SHOWN_CHARS,
    WORKLOAD_RULES,
    CheckedBatch,
    Rule,
    breaches,
    shown,
)

#: the most a GPU may draw, in watts (collector/analysis/physical.py)
MaxPower = Callable[[GpuInfo], float]


@dataclass(frozen=True, slots=True)
class Rejection:
    """One problem in a batch: the field as a JSON path, its value, the GPU it belongs to."""

    reason: RejectReason
    field: str
    message: str
    gpu_uuid: str | None = None


def schema_error(version: int) -> IngestError:
    """The 422 for a batch of a schema version this collector does not speak."""
    return IngestError(
        422,
        f"schema_version {version} is not supported; this collector speaks {SCHEMA_VERSION}",
        "$.schema_version",
        RejectReason.SCHEMA_VERSION,
    )


def batch_problems(
    batch: Batch, now: float, settings: IngestSettings, offset: float, max_power_of: MaxPower
) -> Iterator[Rejection]:
    """The walk over a batch. A ``CheckedBatch`` met every rule of the table as it decoded,
    so for one the walk checks only the rules that involve more than a value: most batches
    are clean, and this loop is on the collector's hot path."""
    values_checked = isinstance(batch, CheckedBatch)
    if batch.schema_version != SCHEMA_VERSION:
        err = schema_error(batch.schema_version)
        yield Rejection(RejectReason.SCHEMA_VERSION, "$.schema_version", err.message)
    if not values_checked:
        yield from _value_problems("$", batch, BATCH_RULES, None)
    ceilings: dict[str, float] = {}  # uuid -> the most it may draw, of each listed GPU
    for i, info in enumerate(batch.gpus):
        if info.uuid and info.uuid in ceilings:
            yield _invalid(f"$.gpus[{i}].uuid", info.uuid, info.uuid, "is listed twice")
        if not values_checked:
            yield from _value_problems(f"$.gpus[{i}]", info, GPU_RULES, info.uuid or None)
        ceilings[info.uuid] = max_power_of(info)
    # placed on the collector's clock or on the node's: what fits neither is refused
    oldest = now + min(offset, 0.0) - settings.past_tolerance_seconds
    newest = now + max(offset, 0.0) + settings.future_tolerance_seconds
    top = MAX_POWER_WATTS  # past it, the value rule names the power
    for i, sample in enumerate(batch.samples):
        ceiling = ceilings.get(sample.gpu_uuid)
        if ceiling is None:
            yield _unknown_gpu(f"$.samples[{i}]", sample.gpu_uuid)
        elif (watts := sample.power_watts) is not None and ceiling < watts <= top:
            yield _invalid(
                f"$.samples[{i}].power_watts",
                watts,
                sample.gpu_uuid,
                f"above the {ceiling:g} W this GPU can draw ({_rating(batch, sample.gpu_uuid)})",
            )
        if not oldest <= sample.timestamp <= newest:  # NaN fails both comparisons
            yield _timestamp_problem(f"$.samples[{i}]", sample, now, settings, offset)
        if not values_checked:
            yield from _sample_problems(f"$.samples[{i}]", sample)
    if not values_checked:
        for i, host in enumerate(batch.hosts):
            yield from _value_problems(f"$.hosts[{i}]", host, HOST_RULES, None)


def _rating(batch: Batch, uuid: str) -> str:
    """Where a GPU's power bound comes from, for the message refusing a power above it."""
    info = next(i for i in batch.gpus if i.uuid == uuid)
    limit = f", power limit {info.power_limit_watts:g} W" if info.power_limit_watts else ""
    return f"{info.name}{limit}: {POWER_MARGIN:g}x its rating, or {UNRATED_MAX_WATTS:g} W unrated"


def _sample_problems(path: str, sample: GpuSample) -> Iterator[Rejection]:
    yield from _value_problems(path, sample, SAMPLE_RULES, sample.gpu_uuid)
    for k, workload in enumerate(sample.workloads):
        yield from _value_problems(
            f"{path}.workloads[{k}]", workload, WORKLOAD_RULES, sample.gpu_uuid
        )
    for j, process in enumerate(sample.processes):
        where = f"{path}.processes[{j}]"
        yield from _value_problems(where, process, PROCESS_RULES, sample.gpu_uuid)
        if process.workload is not None:
            yield from _value_problems(
                f"{where}.workload", process.workload, WORKLOAD_RULES, sample.gpu_uuid
            )


def _value_problems(
    path: str, struct: object, rules: dict[str, Rule], uuid: str | None
) -> Iterator[Rejection]:
    for field, value, rule in breaches(path, struct, rules):
        yield _invalid(field, value, uuid, rule.words)


def _unknown_gpu(path: str, uuid: str) -> Rejection:
    return Rejection(
        RejectReason.UNKNOWN_GPU,
        f"{path}.gpu_uuid",
        f"{path}.gpu_uuid: unknown GPU {shown(uuid)} (not listed in $.gpus)",
        uuid,
    )


def _timestamp_problem(
    path: str, sample: GpuSample, now: float, settings: IngestSettings, offset: float
) -> Rejection:
    """What is wrong with a timestamp outside the tolerance window of ``now`` and of the
    node's clock (``now + offset``)."""
    field, value, uuid = f"{path}.timestamp", sample.timestamp, sample.gpu_uuid
    if not math.isfinite(value):
        return _invalid(field, value, uuid, FINITE.words)
    node_clock = f"; the node's clock is {offset:+.0f} s off the collector's" if offset else ""
    if value > now + max(offset, 0.0) + settings.future_tolerance_seconds:
        return Rejection(
            RejectReason.FUTURE_TIMESTAMP,
            field,
            f"{field} = {value!r} (GPU {uuid}) is {value - now:.0f} s ahead of the collector's "
            f"clock (tolerance {settings.future_tolerance_seconds:g} s{node_clock}); "
            "check the node's clock and the batch's sent_at",
            uuid,
        )
    return Rejection(
        RejectReason.PAST_TIMESTAMP,
        field,
        f"{field} = {value!r} (GPU {uuid}) is {now - value:.0f} s old "
        f"(tolerance {settings.past_tolerance_seconds:g} s{node_clock})",
        uuid,
    )


def _invalid(field: str, value: object, uuid: str | None, rule: str) -> Rejection:
    gpu = f" (GPU {uuid if len(uuid) <= SHOWN_CHARS else shown(uuid)})" if uuid else ""
    return Rejection(
        RejectReason.INVALID_VALUE, field, f"{field} = {shown(value)}{gpu}: {rule}", uuid
    )
