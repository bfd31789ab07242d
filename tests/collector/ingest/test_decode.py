"""Decoding and validation of agent batches (collector/ingest/decode.py), without HTTP."""

from __future__ import annotations

import gzip
import math
import tracemalloc

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.model import SCHEMA_VERSION, Batch, GpuSample, ProcessSample, encode_batch
from collector.backend import IngestError, RejectReason
from collector.config import IngestSettings
from collector.ingest.body import decompress
from collector.ingest.decode import (
    MAX_REJECTIONS,
    decode_batch,
    parse_batch,
    rejection_error,
    validate_batch,
)
from collector.ingest.rules import CheckedBatch
from tests.collector.http.test_app_fake import NOW, make_batch

LIMIT = 1 << 20
TOLERANCE = IngestSettings(future_tolerance_seconds=300.0, past_tolerance_seconds=3600.0)


def problems_of(batch: object) -> list[tuple[str, str]]:
    found = validate_batch(batch, NOW, TOLERANCE)  # type: ignore[arg-type]
    return [(p.reason.value, p.field) for p in found]


def test_a_gzipped_batch_decodes_to_the_same_batch() -> None:
    batch = make_batch()
    expected = msgspec.to_builtins(batch)
    for body, coding in ((gzip.compress(encode_batch(batch)), "gzip"), (encode_batch(batch), None)):
        decoded = decode_batch(body, coding, LIMIT)
        assert isinstance(decoded, CheckedBatch)  # the decoder checked the value ranges
        assert msgspec.to_builtins(decoded) == expected


def test_concatenated_gzip_members_are_one_body() -> None:
    body = b'{"schema_version": 1, "node": "n", ' + b'"agent_boot_id": "b", "seq": 1, '
    rest = b'"sent_at": 1.0, "gpus": [], "samples": []}'
    batch = decode_batch(gzip.compress(body) + gzip.compress(rest), "GZIP", LIMIT)
    assert (batch.node, batch.seq) == ("n", 1)


def test_a_gzip_bomb_is_refused_without_inflating_it() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    assert len(bomb) < LIMIT  # small on the wire, 64 MiB inflated
    tracemalloc.start()
    try:
        with pytest.raises(IngestError) as caught:
            decompress(bomb, "gzip", LIMIT)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.status == 413
    assert caught.value.reason is RejectReason.TOO_LARGE
    assert peak_bytes < 4 * LIMIT


def test_an_identity_body_past_the_limit_is_refused() -> None:
    with pytest.raises(IngestError) as caught:
        decompress(b"x" * (LIMIT + 1), None, LIMIT)
    assert caught.value.status == 413


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (gzip.compress(b'{"a": 1}', mtime=0)[:-6], "truncated"),
        (b"\x1f\x8bnot gzip at all", "corrupt"),
    ],
    ids=["truncated", "corrupt"],
)
def test_broken_gzip_is_a_422_not_a_crash(body: bytes, message: str) -> None:
    with pytest.raises(IngestError) as caught:
        decompress(body, "gzip", LIMIT)
    assert (caught.value.status, message in caught.value.message) == (422, True)


def test_an_unknown_content_encoding_is_415() -> None:
    with pytest.raises(IngestError) as caught:
        decompress(b"{}", "br", LIMIT)
    assert caught.value.status == 415


def test_a_type_error_names_the_json_path_of_the_field() -> None:
    raw = msgspec.json.decode(encode_batch(make_batch(gpus=3)))
    raw["samples"][2]["power_watts"] = "a lot"
    with pytest.raises(IngestError) as caught:
        parse_batch(msgspec.json.encode(raw))
    assert caught.value.field == "$.samples[2].power_watts"
    assert "$.samples[2].power_watts" in caught.value.message


def test_a_number_beyond_float_range_names_the_field() -> None:
    body = encode_batch(make_batch(gpus=1)).replace(b'"power_watts":300.0', b'"power_watts":1e999')
    with pytest.raises(IngestError) as caught:
        parse_batch(body)
    assert (caught.value.status, caught.value.field) == (422, "$.samples[0].power_watts")


def test_nan_is_not_json_and_is_refused_as_malformed() -> None:
    body = encode_batch(make_batch(gpus=1)).replace(b'"power_watts":300.0', b'"power_watts":NaN')
    with pytest.raises(IngestError) as caught:
        parse_batch(body)
    assert (caught.value.status, caught.value.reason) == (422, RejectReason.MALFORMED)


def test_an_unknown_schema_version_is_named_before_its_fields_are_checked() -> None:
    body = b'{"schema_version": 2, "node": 7, "samples": "whatever a v2 agent sends"}'
    with pytest.raises(IngestError) as caught:
        parse_batch(body)
    assert caught.value.field == "$.schema_version"
    assert caught.value.reason is RejectReason.SCHEMA_VERSION
    assert f"speaks {SCHEMA_VERSION}" in caught.value.message


def test_a_good_batch_has_no_problems() -> None:
    assert problems_of(make_batch(gpus=4)) == []


@pytest.mark.parametrize(
    ("fields", "bad_field"),
    [
        ({"power_watts": math.nan}, "power_watts"),
        ({"power_watts": math.inf}, "power_watts"),
        ({"power_watts": -1.0}, "power_watts"),
        ({"energy_joules": -0.5}, "energy_joules"),
        ({"energy_joules": math.inf}, "energy_joules"),
        ({"sm_activity": 1.5}, "sm_activity"),
        ({"sm_activity": math.nan}, "sm_activity"),
        ({"dram_activity": -0.01}, "dram_activity"),
        ({"memory_used_bytes": -1}, "memory_used_bytes"),
        ({"temperature_celsius": math.inf}, "temperature_celsius"),
    ],
)
def test_bad_values_are_named_by_path_value_and_gpu(fields: dict, bad_field: str) -> None:
    batch = make_batch(gpus=2, **fields)
    found = validate_batch(batch, NOW, TOLERANCE)
    assert [(p.reason, p.field) for p in found] == [
        (RejectReason.INVALID_VALUE, f"$.samples[{i}].{bad_field}") for i in range(2)
    ]
    value = next(iter(fields.values()))
    assert repr(value) in found[0].message
    assert "GPU-node-a-0" in found[0].message
    assert found[0].gpu_uuid == "GPU-node-a-0"


def test_activity_at_the_bounds_is_fine() -> None:
    assert problems_of(make_batch(sm_activity=0.0, dram_activity=1.0)) == []


def test_a_process_share_outside_0_1_is_named() -> None:
    batch = make_batch(gpus=1, processes=(ProcessSample(pid=4, sm_share=1.2),))
    assert problems_of(batch) == [("invalid_value", "$.samples[0].processes[0].sm_share")]


def test_timestamps_within_tolerance_pass_and_beyond_are_refused() -> None:
    assert problems_of(make_batch(gpus=1, at=NOW + 299)) == []
    assert problems_of(make_batch(gpus=1, at=NOW - 3599)) == []
    assert problems_of(make_batch(gpus=1, at=NOW + 301)) == [
        ("future_timestamp", "$.samples[0].timestamp")
    ]
    assert problems_of(make_batch(gpus=1, at=NOW - 3601)) == [
        ("past_timestamp", "$.samples[0].timestamp")
    ]


def test_a_future_timestamp_message_tells_how_far_ahead() -> None:
    (problem,) = validate_batch(make_batch(gpus=1, at=NOW + 1000), NOW, TOLERANCE)
    assert "1000 s ahead" in problem.message
    assert "GPU-node-a-0" in problem.message


def test_a_sample_for_a_gpu_not_in_the_batch_is_unknown() -> None:
    batch = make_batch(gpus=2)
    batch = msgspec.structs.replace(batch, gpus=batch.gpus[:1])
    assert problems_of(batch) == [("unknown_gpu", "$.samples[1].gpu_uuid")]
    error = rejection_error(validate_batch(batch, NOW, TOLERANCE))
    assert (error.status, error.field) == (422, "$.samples[1].gpu_uuid")
    assert "unknown GPU 'GPU-node-a-1'" in error.message


def test_identity_fields_are_checked() -> None:
    batch = msgspec.structs.replace(make_batch(), node="", seq=-1, sent_at=math.nan)
    assert problems_of(batch) == [
        ("invalid_value", "$.node"),
        ("invalid_value", "$.seq"),
        ("invalid_value", "$.sent_at"),
    ]


def test_a_gpu_listed_twice_is_refused() -> None:
    batch = make_batch(gpus=1)
    batch = msgspec.structs.replace(batch, gpus=batch.gpus * 2)
    assert problems_of(batch) == [("invalid_value", "$.gpus[1].uuid")]


def test_problems_are_capped_and_the_error_counts_the_rest() -> None:
    batch = make_batch(gpus=50, power_watts=-1.0)
    found = validate_batch(batch, NOW, TOLERANCE)
    assert len(found) == MAX_REJECTIONS
    assert rejection_error(found).message.endswith(f"(and {MAX_REJECTIONS - 1} more)")


def test_a_constructed_batch_with_a_wrong_schema_version_is_a_problem() -> None:
    batch = msgspec.structs.replace(make_batch(), schema_version=SCHEMA_VERSION + 1)
    assert problems_of(batch) == [("schema_version", "$.schema_version")]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([None, "gzip", "identity", "deflate"]))
def test_arbitrary_bytes_never_raise_anything_but_ingest_error(body: bytes, coding: str) -> None:
    try:
        batch = decode_batch(body, coding, 4096)
    except IngestError as err:
        assert 400 <= err.status < 500
    else:
        validate_batch(batch, NOW, TOLERANCE)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


SAMPLE_FIELDS = sorted(GpuSample.__struct_fields__)
BATCH_FIELDS = sorted(Batch.__struct_fields__)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SAMPLE_FIELDS), st.sampled_from(BATCH_FIELDS), json_values, json_values)
def test_any_json_value_in_any_field_never_raises_anything_but_ingest_error(
    sample_field: str, batch_field: str, sample_value: object, batch_value: object
) -> None:
    raw = msgspec.json.decode(encode_batch(make_batch(gpus=1)))
    raw["samples"][0][sample_field] = sample_value
    if batch_field != "schema_version":
        raw[batch_field] = batch_value
    try:
        batch = parse_batch(msgspec.json.encode(raw))
    except IngestError as err:
        assert err.status == 422
        assert err.field is None or err.field.startswith("$")
    else:
        validate_batch(batch, NOW, TOLERANCE)


def test_a_foreign_schema_version_in_a_well_formed_body_is_named() -> None:
    raw = msgspec.json.decode(encode_batch(make_batch(gpus=1)))
    raw["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(IngestError) as caught:
        parse_batch(msgspec.json.encode(raw))
    assert (caught.value.field, caught.value.reason) == (
        "$.schema_version",
        RejectReason.SCHEMA_VERSION,
    )


def test_a_missing_schema_version_is_a_field_error_naming_it() -> None:
    raw = msgspec.json.decode(encode_batch(make_batch(gpus=1)))
    del raw["schema_version"]
    with pytest.raises(IngestError) as caught:
        parse_batch(msgspec.json.encode(raw))
    assert caught.value.status == 422 and "schema_version" in caught.value.message
