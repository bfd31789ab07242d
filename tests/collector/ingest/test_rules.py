"""The value rule table (collector/ingest/rules.py), one rule at a time: a value breaking it
is refused with a message naming the field, the value and the rule, and its bounds pass,
both in a batch decoded from JSON (which msgspec holds to the table as it parses) and in
one built in code (which the walk holds to the table)."""

from __future__ import annotations

import math
import types
from typing import Any, get_args

import msgspec
import pytest

from agent.model import Batch, GpuInfo, GpuSample, ProcessSample, encode_batch
from collector.backend import IngestError, RejectReason
from collector.ingest.decode import parse_batch, validate_batch
from collector.ingest.rules import (
    BATCH_RULES,
    GPU_RULES,
    PROCESS_RULES,
    SAMPLE_RULES,
    CheckedBatch,
    Rule,
)
from tests.collector.http.test_app_fake import NOW, make_batch
from tests.collector.ingest.test_decode import TOLERANCE

TABLES: dict[str, tuple[type[Any], dict[str, Rule]]] = {
    "$": (Batch, BATCH_RULES),
    "$.gpus[0]": (GpuInfo, GPU_RULES),
    "$.samples[0]": (GpuSample, SAMPLE_RULES),
    "$.samples[0].processes[0]": (ProcessSample, PROCESS_RULES),
}
RULES = [
    pytest.param(where, name, id=f"{where}.{name}")
    for where, (_, rules) in TABLES.items()
    for name in rules
]


def is_int(where: str, name: str) -> bool:
    struct = TABLES[where][0]
    (kind,) = [f.type for f in msgspec.structs.fields(struct) if f.name == name]
    return kind is int or int in get_args(kind)


def bounds(where: str, name: str) -> list[object]:
    """The values at the edge of the rule that pass it."""
    rule = TABLES[where][1][name]
    if rule.min_length:
        return ["x" * rule.min_length]
    edges = [v for v in (rule.ge, rule.le) if math.isfinite(v)] or [-1e300, 1e300]
    return [int(v) if is_int(where, name) else v for v in edges]


def breakers(where: str, name: str) -> list[object]:
    """Values just past the rule's bounds, and for a float rule the values JSON cannot carry."""
    rule = TABLES[where][1][name]
    if rule.min_length:
        return ["x" * (rule.min_length - 1)]
    step = 1 if is_int(where, name) else 0.5
    beyond = [rule.ge - step] if math.isfinite(rule.ge) else []
    beyond += [rule.le + step] if math.isfinite(rule.le) else []
    beyond = [int(v) for v in beyond] if is_int(where, name) else beyond
    return beyond if is_int(where, name) else [*beyond, math.nan, math.inf, -math.inf]


def batch_with(where: str, name: str, value: object) -> Batch:
    """A good one-GPU batch with one process, ``name`` set to ``value`` at ``where``."""
    batch = make_batch(gpus=1, processes=(ProcessSample(pid=3),))
    (sample,), (info,) = batch.samples, batch.gpus
    if where == "$":
        return msgspec.structs.replace(batch, **{name: value})
    if where == "$.gpus[0]":
        info = msgspec.structs.replace(info, **{name: value})
        if name == "uuid":  # the sample follows its GPU
            sample = msgspec.structs.replace(sample, gpu_uuid=value)
    elif where == "$.samples[0]":
        sample = msgspec.structs.replace(sample, **{name: value})
    else:
        process = msgspec.structs.replace(sample.processes[0], **{name: value})
        sample = msgspec.structs.replace(sample, processes=(process,))
    return msgspec.structs.replace(batch, gpus=(info,), samples=(sample,))


def decoded(batch: Batch) -> Batch:
    return parse_batch(encode_batch(batch))


def assert_refused_by_name(batch: Batch, where: str, name: str, value: object) -> None:
    (problem,) = validate_batch(batch, NOW, TOLERANCE)
    field = f"{where}.{name}"
    assert (problem.reason, problem.field) == (RejectReason.INVALID_VALUE, field)
    assert problem.message.startswith(f"{field} = {value!r}")
    assert problem.message.endswith(TABLES[where][1][name].words)


@pytest.mark.parametrize(("where", "name"), RULES)
def test_a_value_breaking_a_rule_is_refused_by_name(where: str, name: str) -> None:
    for value in breakers(where, name):
        assert_refused_by_name(batch_with(where, name, value), where, name, value)


@pytest.mark.parametrize(("where", "name"), RULES)
def test_a_decoded_value_breaking_a_rule_is_refused_by_name(where: str, name: str) -> None:
    for value in breakers(where, name):
        if isinstance(value, float) and not math.isfinite(value):
            continue  # not JSON: the encoder writes null
        batch = decoded(batch_with(where, name, value))
        assert not isinstance(batch, CheckedBatch)  # the rule is a constraint of the decoder
        assert_refused_by_name(batch, where, name, value)


@pytest.mark.parametrize(("where", "name"), RULES)
def test_the_bounds_of_a_rule_pass_it(where: str, name: str) -> None:
    for value in bounds(where, name):
        batch = batch_with(where, name, value)
        assert validate_batch(batch, NOW, TOLERANCE) == []
        assert isinstance(decoded(batch), CheckedBatch)
        assert validate_batch(decoded(batch), NOW, TOLERANCE) == []


def test_every_number_a_sample_or_process_carries_has_a_rule() -> None:
    """A new wire field is not left unchecked (the timestamp has its own window rule)."""
    for struct, rules in ((GpuSample, SAMPLE_RULES), (ProcessSample, PROCESS_RULES)):
        for f in msgspec.structs.fields(struct):
            kinds = get_args(f.type) if isinstance(f.type, types.UnionType) else (f.type,)
            if (int in kinds or float in kinds) and f.name != "timestamp":
                assert f.name in rules, f"{struct.__name__}.{f.name} has no rule"


def test_a_required_field_stays_required_under_its_rule() -> None:
    raw = msgspec.json.decode(encode_batch(batch_with("$.samples[0]", "power_watts", 1.0)))
    raw["samples"][0]["processes"][0]["pid"] = None
    with pytest.raises(IngestError) as caught:
        parse_batch(msgspec.json.encode(raw))
    assert (caught.value.reason, caught.value.field) == (
        RejectReason.MALFORMED,
        "$.samples[0].processes[0].pid",
    )
