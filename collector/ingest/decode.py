"""Decoding and validating what agents POST to ``/v1/batches``.

Pure functions over bytes and plain data. ``accept_body`` runs on the ingest thread
(queue.py), which the edge hands the body as read; the HTTP edge (http/app.py) turns the
``IngestError`` it raises into a status code and a JSON body naming the offending field.

A batch with any bad sample is refused as a whole (422), not trimmed: the agent drops a
refused batch and counts it, so "everything acknowledged was applied" stays true with no
partial acknowledgements to reconcile. One node's bad batch is refused before it is stored
or buffered, so it cannot touch another node's state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

import msgspec

from agent.model import SCHEMA_VERSION, Batch, GpuSample
from collector.backend import IngestError, RejectReason
from collector.config import CollectorSettings, IngestSettings
from collector.fleet.clocks import MAX_OFFSET_SECONDS, NodeClocks
from collector.ingest.body import decompress
from collector.ingest.rules import (
    BATCH_RULES,
    FINITE,
    GPU_RULES,
    PROCESS_RULES,
    SAMPLE_RULES,
    CheckedBatch,
    Rule,
)

#: validation stops collecting problems after this many (the batch is refused anyway)
MAX_REJECTIONS = 20

_PATH = re.compile(r" - at `(\$[^`]*)`")


class _Versioned(msgspec.Struct):
    schema_version: int


_BATCH_DECODER = msgspec.json.Decoder(Batch)
_CHECKED_DECODER = msgspec.json.Decoder(CheckedBatch)
_VERSION_DECODER = msgspec.json.Decoder(_Versioned)


@dataclass(frozen=True, slots=True)
class Rejection:
    """One problem in a batch: the field as a JSON path, its value, the GPU it belongs to."""

    reason: RejectReason
    field: str
    message: str
    gpu_uuid: str | None = None


def decode_batch(body: bytes, content_encoding: str | None, max_body_bytes: int) -> Batch:
    """Decompress (gzip or identity) and decode a batch; IngestError names what is wrong."""
    return parse_batch(decompress(body, content_encoding, max_body_bytes))


def parse_batch(data: bytes) -> Batch:
    """Decode JSON into a Batch; an unknown schema version is named before any field.

    The body is decoded once, straight into a ``CheckedBatch`` (msgspec checks the value
    rules of collector/ingest/rules.py as it parses). When that fails it is decoded again
    as a plain Batch: a value out of range then decodes, and ``validate_batch`` names every
    bad value with its GPU. Only when that fails too is the ``schema_version`` probed, so a
    newer agent's batch (whose fields may have changed shape) gets the clear "unsupported
    schema_version" answer, not a field error.
    """
    try:
        batch = _CHECKED_DECODER.decode(data)
    except msgspec.ValidationError:
        batch = _parse_plain(data)
    except msgspec.DecodeError as err:
        raise IngestError(422, f"body is not valid JSON: {err}") from err
    if batch.schema_version != SCHEMA_VERSION:
        raise _schema_error(batch.schema_version)
    return batch


def _parse_plain(data: bytes) -> Batch:
    try:
        return _BATCH_DECODER.decode(data)
    except msgspec.ValidationError as err:
        _check_schema_version(data)
        raise _decode_error(err) from err
    except msgspec.DecodeError as err:  # past the point where the checked decode stopped
        raise IngestError(422, f"body is not valid JSON: {err}") from err


def _check_schema_version(data: bytes) -> None:
    """Raise the schema error for a foreign version, or the error reading the version."""
    try:
        version = _VERSION_DECODER.decode(data).schema_version
    except msgspec.ValidationError as err:
        raise _decode_error(err) from err
    if version != SCHEMA_VERSION:
        raise _schema_error(version)


def _decode_error(err: msgspec.ValidationError) -> IngestError:
    match = _PATH.search(str(err))
    return IngestError(422, str(err), match.group(1) if match else None)


def _schema_error(version: int) -> IngestError:
    return IngestError(
        422,
        f"schema_version {version} is not supported; this collector speaks {SCHEMA_VERSION}",
        "$.schema_version",
        RejectReason.SCHEMA_VERSION,
    )


def validate_batch(
    batch: Batch, now: float, settings: IngestSettings, offset_seconds: float = 0.0
) -> list[Rejection]:
    """Every problem in a decoded batch (at most MAX_REJECTIONS); empty when it is fine.

    ``now`` is the collector's clock, ``offset_seconds`` how far the node's clock is ahead
    of it (fleet/clocks.py). Checks: schema version; the value rules of
    collector/ingest/rules.py (identity, finite and non-negative power, energy, clocks and
    counters, activities in [0, 1]); timestamps within the configured tolerances of the
    collector's clock or of the node's (a skewed node's samples are placed by its offset);
    every sample's GPU listed once in ``batch.gpus``.
    """
    return list(islice(_batch_problems(batch, now, settings, offset_seconds), MAX_REJECTIONS))


def accept_body(
    body: bytes,
    content_encoding: str | None,
    now: float,
    settings: CollectorSettings,
    clocks: NodeClocks | None = None,
) -> Batch:
    """All that ``POST /v1/batches`` checks of a body, in order: decompress (413 past
    ``server.max_body_bytes``), decode (422), measure the node's clock in ``clocks`` from
    ``sent_at``, validate against ``ingest`` at ``now`` and on the batch's own clock (422
    naming the first problem). A refused batch that decoded names its sample count in the
    IngestError's ``samples``."""
    batch = decode_batch(body, content_encoding, settings.server.max_body_bytes)
    offset = _measure_clock(clocks, batch, now)
    problems = validate_batch(batch, now, settings.ingest, offset)
    if problems:
        err = rejection_error(problems)
        err.samples = len(batch.samples)
        raise err
    return batch


def _measure_clock(clocks: NodeClocks | None, batch: Batch, now: float) -> float:
    """How far this batch's clock is ahead of ``now``, from its ``sent_at``, counted in
    ``clocks``; 0.0 when ``sent_at`` is no clock: older than the batch's own samples (the
    agent builds a batch after them), or off by more than ``MAX_OFFSET_SECONDS``."""
    offset = batch.sent_at - now
    newest = max((s.timestamp for s in batch.samples), default=-math.inf)
    if batch.sent_at < newest or not -MAX_OFFSET_SECONDS <= offset <= MAX_OFFSET_SECONDS:
        return 0.0
    if clocks is not None:
        clocks.measure(batch.node, batch.sent_at, now)
    return offset


def rejection_error(problems: list[Rejection]) -> IngestError:
    """The IngestError (422) for a non-empty list of problems: the first one, and a count."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return IngestError(422, first.message + more, first.field, first.reason)


def _batch_problems(
    batch: Batch, now: float, settings: IngestSettings, offset: float
) -> Iterator[Rejection]:
    """The walk over a batch. A ``CheckedBatch`` met every rule of the table as it decoded,
    so for one the walk checks only the rules that involve more than a value: most batches
    are clean, and this loop is on the collector's hot path."""
    values_checked = isinstance(batch, CheckedBatch)
    if batch.schema_version != SCHEMA_VERSION:
        err = _schema_error(batch.schema_version)
        yield Rejection(RejectReason.SCHEMA_VERSION, "$.schema_version", err.message)
    if not values_checked:
        yield from _value_problems("$", batch, BATCH_RULES, None)
    known: set[str] = set()
    for i, info in enumerate(batch.gpus):
        if info.uuid and info.uuid in known:
            yield _invalid(f"$.gpus[{i}].uuid", info.uuid, info.uuid, "is listed twice")
        if not values_checked:
            yield from _value_problems(f"$.gpus[{i}]", info, GPU_RULES, info.uuid or None)
        known.add(info.uuid)
    # placed on the collector's clock or on the node's: what fits neither is refused
    oldest = now + min(offset, 0.0) - settings.past_tolerance_seconds
    newest = now + max(offset, 0.0) + settings.future_tolerance_seconds
    for i, sample in enumerate(batch.samples):
        if sample.gpu_uuid not in known:
            yield _unknown_gpu(f"$.samples[{i}]", sample.gpu_uuid)
        if not oldest <= sample.timestamp <= newest:  # NaN fails both comparisons
            yield _timestamp_problem(f"$.samples[{i}]", sample, now, settings, offset)
        if not values_checked:
            yield from _sample_problems(f"$.samples[{i}]", sample)


def _sample_problems(path: str, sample: GpuSample) -> Iterator[Rejection]:
    yield from _value_problems(path, sample, SAMPLE_RULES, sample.gpu_uuid)
    for j, process in enumerate(sample.processes):
        yield from _value_problems(
            f"{path}.processes[{j}]", process, PROCESS_RULES, sample.gpu_uuid
        )


def _value_problems(
    path: str, struct: object, rules: dict[str, Rule], uuid: str | None
) -> Iterator[Rejection]:
    for name, rule in rules.items():
        value = getattr(struct, name)
        if not rule.accepts(value):
            yield _invalid(f"{path}.{name}", value, uuid, rule.words)


def _unknown_gpu(path: str, uuid: str) -> Rejection:
    return Rejection(
        RejectReason.UNKNOWN_GPU,
        f"{path}.gpu_uuid",
        f"{path}.gpu_uuid: unknown GPU {uuid!r} (not listed in $.gpus)",
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
    gpu = f" (GPU {uuid})" if uuid else ""
    return Rejection(
        RejectReason.INVALID_VALUE, field, f"{field} = {value!r}{gpu}: {rule}", gpu_uuid=uuid
    )
