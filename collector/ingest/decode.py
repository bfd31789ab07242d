"""Decoding and validating what agents POST to ``/v1/batches``.

Pure functions over bytes and plain data. ``accept_body`` runs on the ingest thread
(queue.py), which the edge hands the body as read; the HTTP edge (http/app.py) turns the
``IngestError`` it raises into a status code and a JSON body naming the offending field.
What a decoded batch is checked for is problems.py's walk over the rules of rules.py.

A batch with any bad sample is refused as a whole (422), not trimmed: the agent drops a
refused batch and counts it, so "everything acknowledged was applied" stays true with no
partial acknowledgements to reconcile. One node's bad batch is refused before it is stored
or buffered, so it cannot touch another node's state.
"""

from __future__ import annotations

import math
import re
import sys
from itertools import islice

import msgspec

from agent.model import SCHEMA_VERSION, Batch, GpuInfo
from collector.analysis.physical import max_power_watts
from collector.backend import IngestError
from collector.config import CollectorSettings, IngestSettings
from collector.fleet.clocks import MAX_OFFSET_SECONDS, NodeClocks
from collector.ingest.body import decompress
from collector.ingest.problems import MaxPower, Rejection, batch_problems, schema_error
from collector.ingest.rules import CheckedBatch

#: validation stops collecting problems after this many (the batch is refused anyway)
MAX_REJECTIONS = 20
#: how deep a batch's JSON nests: batch, samples, a sample, processes, a process, its
#: workload, its labels
BATCH_DEPTH = 7

_PATH = re.compile(r" - at `(\$[^`]*)`")
#: how JSON spells a NUL character (a raw one is not valid JSON inside a string)
_NUL = b"\\u0000"
#: every JSON escape starts with one: most bodies have none, and a one-byte search is a
#: memchr, ~10x cheaper than the six-byte ``_NUL`` search over the whole body
_ESCAPE = b"\\"


class _Versioned(msgspec.Struct):
    schema_version: int


_BATCH_DECODER = msgspec.json.Decoder(Batch)
_CHECKED_DECODER = msgspec.json.Decoder(CheckedBatch)
_VERSION_DECODER = msgspec.json.Decoder(_Versioned)


def decode_batch(body: bytes, content_encoding: str | None, max_body_bytes: int) -> Batch:
    """Decompress (gzip or identity) and decode a batch; IngestError names what is wrong."""
    return parse_batch(decompress(body, content_encoding, max_body_bytes))


def parse_batch(data: bytes) -> Batch:
    """Decode JSON into a Batch; an unknown schema version is named before any field, and
    a body nesting arrays or objects deeper than the decoder recurses is refused (422).

    The body is decoded once, straight into a ``CheckedBatch`` (msgspec checks the value
    rules of collector/ingest/rules.py as it parses). When that fails it is decoded again
    as a plain Batch: a value out of range then decodes, and ``validate_batch`` names every
    bad value with its GPU. Only when that fails too is the ``schema_version`` probed, so a
    newer agent's batch (whose fields may have changed shape) gets the clear "unsupported
    schema_version" answer, not a field error.
    """
    try:
        return _parse(data)
    except RecursionError as err:  # msgspec recurses per level, even skipping unknown fields
        raise IngestError(
            422,
            "body nests JSON arrays or objects deeper than the collector decodes (about "
            f"{sys.getrecursionlimit()} levels; a batch nests {BATCH_DEPTH}): send a batch as "
            "the agent builds it",
        ) from err


def _parse(data: bytes) -> Batch:
    try:
        batch = _CHECKED_DECODER.decode(data)
    except msgspec.ValidationError:
        batch = _parse_plain(data)
    except msgspec.DecodeError as err:
        raise IngestError(422, f"body is not valid JSON: {err}") from err
    if batch.schema_version != SCHEMA_VERSION:
        raise schema_error(batch.schema_version)
    if _ESCAPE in data and _NUL in data and isinstance(batch, CheckedBatch):
        # a string with a NUL character passed the constraints (rules.py NO_NUL): decoded
        # plainly, ``validate_batch`` walks the values and names it
        return _BATCH_DECODER.decode(data)
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
        raise schema_error(version)


def _decode_error(err: msgspec.ValidationError) -> IngestError:
    match = _PATH.search(str(err))
    return IngestError(422, str(err), match.group(1) if match else None)


def validate_batch(
    batch: Batch,
    now: float,
    settings: IngestSettings,
    offset_seconds: float = 0.0,
    max_power_of: MaxPower | None = None,
) -> list[Rejection]:
    """Every problem in a decoded batch (at most MAX_REJECTIONS); empty when it is fine.

    ``now`` is the collector's clock, ``offset_seconds`` how far the node's clock is ahead
    of it (fleet/clocks.py), ``max_power_of`` the most each GPU may draw (None: judged by
    its power limit alone; analysis/physical.py). Checks: schema version; the value rules
    of collector/ingest/rules.py (identity, storage and physical bounds, lengths and
    counts); each sample's power within its GPU's bound; timestamps within the configured
    tolerances of the collector's clock or of the node's (a skewed node's samples are
    placed by its offset); every sample's GPU listed once in ``batch.gpus``.
    """
    found = batch_problems(batch, now, settings, offset_seconds, max_power_of or _by_limit)
    return list(islice(found, MAX_REJECTIONS))


def _by_limit(info: GpuInfo) -> float:
    return max_power_watts(None, info.power_limit_watts)


def accept_body(
    body: bytes,
    content_encoding: str | None,
    now: float,
    settings: CollectorSettings,
    clocks: NodeClocks | None = None,
    max_power_of: MaxPower | None = None,
) -> Batch:
    """All that ``POST /v1/batches`` checks of a body, in order: decompress (413 past
    ``server.max_body_bytes``), decode (422), measure the node's clock in ``clocks`` from
    ``sent_at``, validate against ``ingest`` at ``now``, on the batch's own clock and
    against ``max_power_of`` (422 naming the first problem). A refused batch that decoded
    names its sample count in the IngestError's ``samples``."""
    batch = decode_batch(body, content_encoding, settings.server.max_body_bytes)
    offset = _measure_clock(clocks, batch, now)
    problems = validate_batch(batch, now, settings.ingest, offset, max_power_of)
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
