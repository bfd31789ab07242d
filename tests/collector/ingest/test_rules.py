"""The value rule table (collector/ingest/rules.py), one rule at a time: a value breaking it
is refused with a message naming the field, the value and the rule, and its bounds pass,
both in a batch decoded from JSON (which msgspec holds to the table as it parses) and in
one built in code (which the walk holds to the table)."""

from __future__ import annotations

import math
import types
from pathlib import Path
from typing import Any, get_args, get_origin

import msgspec
import pytest

from agent.model import (
    Batch,
    GpuInfo,
    GpuSample,
    ProcessSample,
    Workload,
    WorkloadHostSample,
    WorkloadKind,
    encode_batch,
)
from collector.analysis.physical import UNRATED_MAX_WATTS
from collector.backend import IngestError, RejectReason
from collector.ingest.decode import parse_batch, validate_batch
from collector.ingest.rules import (
    BATCH_RULES,
    GPU_RULES,
    HOST_RULES,
    ID,
    INT64_MAX,
    MAX_SAMPLES,
    NODE_NAME,
    PROCESS_RULES,
    SAMPLE_RULES,
    WORKLOAD_RULES,
    CheckedBatch,
    Rule,
    shown,
)
from collector.ledger.batch_log import BatchLog, BatchRecord
from tests.collector.http.test_app_fake import NOW, make_batch
from tests.collector.ingest.test_decode import TOLERANCE

TABLES: dict[str, tuple[type[Any], dict[str, Rule]]] = {
    "$": (Batch, BATCH_RULES),
    "$.gpus[0]": (GpuInfo, GPU_RULES),
    "$.samples[0]": (GpuSample, SAMPLE_RULES),
    "$.samples[0].processes[0]": (ProcessSample, PROCESS_RULES),
    "$.samples[0].workloads[0]": (Workload, WORKLOAD_RULES),
    "$.hosts[0]": (WorkloadHostSample, HOST_RULES),
}
#: rules on how many structs a batch or sample lists: tested one by one below
COUNTS = {("$", "gpus"), ("$", "samples"), ("$", "hosts"), ("$.samples[0]", "processes"),
          ("$.samples[0]", "workloads")}  # fmt: skip
RULES = [
    pytest.param(where, name, id=f"{where}.{name}")
    for where, (_, rules) in TABLES.items()
    for name in rules
    if (where, name) not in COUNTS
]


def is_int(where: str, name: str) -> bool:
    struct = TABLES[where][0]
    (kind,) = [f.type for f in msgspec.structs.fields(struct) if f.name == name]
    return kind is int or int in get_args(kind)


def bounds(where: str, name: str) -> list[object]:
    """The values at the edge of the rule that pass it."""
    rule = TABLES[where][1][name]
    if rule.each is not None:  # a tuple of integers, or labels
        assert rule.max_length is not None
        if name == "xid_errors":
            return [(int(rule.each.le),) * rule.max_length]
        longest = "x" * (rule.each.max_length or 0)
        return [{longest: longest}, {f"k{i}": "v" for i in range(rule.max_length)}]
    if rule.min_length or rule.max_length:
        return ["x" * rule.min_length, "x" * (rule.max_length or rule.min_length)]
    edges = [v for v in (rule.ge, rule.le) if math.isfinite(v)] or [-1e300, 1e300]
    return [int(v) if is_int(where, name) else v for v in edges]


def breakers(where: str, name: str) -> list[object]:
    """Values just past the rule's bounds, and for a float rule the values JSON cannot carry."""
    rule = TABLES[where][1][name]
    if rule.each is not None:
        assert rule.max_length is not None
        if name == "xid_errors":
            return [(1,) * (rule.max_length + 1), (int(rule.each.le) + 1,), (-1,)]
        long = "x" * ((rule.each.max_length or 0) + 1)
        return [{long: "v"}, {"k": long}, {f"k{i}": "v" for i in range(rule.max_length + 1)}]
    if rule.min_length or rule.max_length:
        short = ["x" * (rule.min_length - 1)] if rule.min_length else []
        return short + (["x" * (rule.max_length + 1)] if rule.max_length else [])
    step = 1 if is_int(where, name) else 0.5
    beyond = [rule.ge - step] if math.isfinite(rule.ge) else []
    beyond += [rule.le + step] if math.isfinite(rule.le) else []
    beyond = [int(v) for v in beyond] if is_int(where, name) else beyond
    return beyond if is_int(where, name) else [*beyond, math.nan, math.inf, -math.inf]


def batch_with(where: str, name: str, value: object) -> Batch:
    """A good one-GPU batch with one process, ``name`` set to ``value`` at ``where``. The
    GPU is rated ``UNRATED_MAX_WATTS`` (its power limit), so any power the table lets
    through is within its physical bound."""
    batch = make_batch(gpus=1, processes=(ProcessSample(pid=3),))
    (sample,), (info,) = batch.samples, batch.gpus
    info = msgspec.structs.replace(info, power_limit_watts=UNRATED_MAX_WATTS)
    if where == "$":
        return msgspec.structs.replace(batch, gpus=(info,), **{name: value})
    if where == "$.hosts[0]":
        host = WorkloadHostSample(timestamp=sample.timestamp, workload_key="pod:ns/a")
        host = msgspec.structs.replace(host, **{name: value})
        return msgspec.structs.replace(batch, gpus=(info,), hosts=(host,))
    if where == "$.gpus[0]":
        info = msgspec.structs.replace(info, **{name: value})
        if name == "uuid":  # the sample follows its GPU
            sample = msgspec.structs.replace(sample, gpu_uuid=value)
    elif where == "$.samples[0]":
        sample = msgspec.structs.replace(sample, **{name: value})
        if name == "gpu_uuid":  # and the GPU its sample
            info = msgspec.structs.replace(info, uuid=value)
    elif where == "$.samples[0].workloads[0]":
        workload = msgspec.structs.replace(sample.workloads[0], **{name: value})
        sample = msgspec.structs.replace(sample, workloads=(workload,))
    else:
        process = msgspec.structs.replace(sample.processes[0], **{name: value})
        sample = msgspec.structs.replace(sample, processes=(process,))
    return msgspec.structs.replace(batch, gpus=(info,), samples=(sample,))


def decoded(batch: Batch) -> Batch:
    return parse_batch(encode_batch(batch))


def assert_refused_by_name(batch: Batch, where: str, name: str, value: object) -> None:
    rule = TABLES[where][1][name]
    field = f"{where}.{name}"
    problems = validate_batch(batch, NOW, TOLERANCE)
    if (where, name) in (("$.gpus[0]", "uuid"), ("$.samples[0]", "gpu_uuid")):
        problems = [p for p in problems if p.field == field]  # the GPU and its sample
    (problem,) = problems
    assert (problem.reason, problem.field) == (RejectReason.INVALID_VALUE, field)
    named = value if rule.each is None else _breaking_entry(value, rule.each)
    assert problem.message.startswith(f"{field} = {shown(named)}")
    assert problem.message.endswith(rule.each.words if named is not value else rule.words)  # type: ignore[union-attr]


def _breaking_entry(value: Any, each: Rule) -> object:
    """The entry of a container that breaks ``each``, or the container (too many entries)."""
    entries = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    return next((v for v in entries if not each.accepts(v)), value)


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


#: fields held by a rule of their own: the version by the decoder, timestamps by the
#: clock window, a workload's kind by its enum
UNBOUNDED = {"schema_version", "timestamp", "kind"}


def test_every_number_string_and_list_a_batch_carries_has_a_rule() -> None:
    """A new wire field is not left unbounded: what the ledger cannot hold would halt it."""
    for struct, rules in TABLES.values():
        for f in msgspec.structs.fields(struct):
            kinds = get_args(f.type) if isinstance(f.type, types.UnionType) else (f.type,)
            kinds = tuple(get_origin(k) or k for k in kinds)
            bounded = (int, float, str, tuple, dict)
            if any(k in bounded for k in kinds) and f.name not in UNBOUNDED:
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


def entries(where: str, name: str, count: int) -> Batch:
    """A good batch with ``count`` entries in the list ``name`` at ``where``."""
    batch = make_batch(gpus=1, processes=(ProcessSample(pid=3),))
    (sample,), (info,) = batch.samples, batch.gpus
    if name == "gpus":
        gpus = tuple(msgspec.structs.replace(info, uuid=f"GPU-{i}") for i in range(count))
        return msgspec.structs.replace(batch, gpus=gpus, samples=())
    if name == "samples":
        at = [sample.timestamp - i * 1e-3 for i in range(count)]
        samples = tuple(msgspec.structs.replace(sample, timestamp=t) for t in at)
        return msgspec.structs.replace(batch, samples=samples)
    if name == "hosts":
        host = WorkloadHostSample(timestamp=sample.timestamp, workload_key="pod:ns/a")
        return msgspec.structs.replace(batch, hosts=(host,) * count)
    many = tuple(getattr(sample, name)[:1] * count)
    return msgspec.structs.replace(
        batch, samples=(msgspec.structs.replace(sample, **{name: many}),)
    )


@pytest.mark.parametrize(("where", "name"), sorted(COUNTS))
def test_a_list_longer_than_its_rule_is_refused_by_name_and_its_limit_passes(
    where: str, name: str
) -> None:
    rule = TABLES[where][1][name]
    assert rule.max_length is not None
    fits, past = entries(where, name, rule.max_length), entries(where, name, rule.max_length + 1)
    assert validate_batch(fits, NOW, TOLERANCE) == []
    assert isinstance(decoded(fits), CheckedBatch)
    for batch in (past, decoded(past)):
        (problem,) = validate_batch(batch, NOW, TOLERANCE)
        assert problem.field == f"{where}.{name}"
        assert problem.message == (
            f"{where}.{name} = <{rule.max_length + 1} entries>"
            + ("" if where == "$" else " (GPU GPU-node-a-0)")
            + f": {rule.words}"
        )


def test_a_process_workload_is_held_to_the_workload_rules() -> None:
    long = "x" * (WORKLOAD_RULES["namespace"].max_length or 0) + "y"
    pod = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid", name="p", namespace=long)
    batch = make_batch(gpus=1, processes=(ProcessSample(pid=3, workload=pod),))
    for each in (batch, decoded(batch)):
        (problem,) = validate_batch(each, NOW, TOLERANCE)
        assert problem.field == "$.samples[0].processes[0].workload.namespace"


def test_the_longest_identity_the_table_lets_through_fits_the_batch_log_framing(
    tmp_path: Path,
) -> None:
    """The batch log frames a record's node and boot id lengths in 16 bits and its seq in
    a signed 64: the table keeps every accepted batch within them (4-byte characters)."""
    wide = "\U0001f600"
    node, boot = wide * (NODE_NAME.max_length or 0), wide * (ID.max_length or 0)
    entry = BatchRecord(node, boot, INT64_MAX, NOW, b"{}", MAX_SAMPLES)
    log = BatchLog(tmp_path, sync=False)
    log.append([entry])
    log.close()
    reopened = BatchLog(tmp_path, sync=False)
    assert [found.entry for found in reopened.found] == [entry]
    reopened.close()


def is_text(where: str, name: str) -> bool:
    struct = TABLES[where][0]
    (kind,) = [f.type for f in msgspec.structs.fields(struct) if f.name == name]
    return kind is str or str in get_args(kind) or "dict[str, str]" in str(kind)


TEXT_FIELDS = [
    pytest.param(where, name, id=f"{where}.{name}")
    for where, (_, rules) in TABLES.items()
    for name in rules
    if is_text(where, name)
]


@pytest.mark.parametrize(("where", "name"), TEXT_FIELDS)
def test_a_nul_character_in_any_string_is_refused_by_name(where: str, name: str) -> None:
    """PostgreSQL's text cannot hold a NUL: one accepted would fail every commit after it,
    for the whole fleet. Refused by name whether the batch arrives decoded or as JSON."""
    text = "a\x00b"
    value: object = {"k": text} if name.endswith("labels") else text
    batch = batch_with(where, name, value)
    field = f"{where}.{name}"
    for each in (batch, decoded(batch)):
        assert not isinstance(each, CheckedBatch)
        problems = [p for p in validate_batch(each, NOW, TOLERANCE) if p.field == field]
        (problem,) = problems
        assert problem.reason == RejectReason.INVALID_VALUE
        assert problem.message.startswith(f"{field} = {text!r}")
        assert problem.message.endswith("must not contain a NUL character (\\u0000): "
                                        "the ledger cannot store one")  # fmt: skip
