"""Line protocol for the InfluxDB sink: raw GPU samples and hourly workload rollups.

Pure functions over plain data; influxdb-client's ``Point`` does the escaping. Values keep
the wire contract's SI units and field names (``power_watts``, ``energy_joules``); a
``None`` reading is left out of the point, never written as 0. Timestamps are nanoseconds.

- ``gpu``: one point per sample; tags ``node``, ``uuid``, ``model`` (the NVML name),
  ``workload`` (the holders' keys, sorted, comma-joined; absent when nobody holds the GPU).
  The ``healthy`` field is always present, so every sample is exactly one point.
- ``workload_hour``: one point per (hour, workload), stamped at the hour's start, carrying
  the hour's totals so far; a later write for the same hour replaces it (InfluxDB keeps
  the last point per series and timestamp).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from influxdb_client.client.write.point import Point

from agent.model import Batch, GpuSample
from collector.ledger.records import batch_json
from collector.records import Usage, WorkloadRef

SAMPLE_MEASUREMENT = "gpu"
ROLLUP_MEASUREMENT = "workload_hour"

#: GpuSample fields written as they are (SI units, ratios 0..1)
SAMPLE_FIELDS = (
    "sm_activity",
    "sm_occupancy",
    "tensor_activity",
    "dram_activity",
    "encoder_activity",
    "decoder_activity",
    "power_watts",
    "energy_joules",
    "temperature_celsius",
    "memory_temperature_celsius",
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_reserved_bytes",
    "sm_clock_hertz",
    "memory_clock_hertz",
    "throttle_reasons",
)
#: Usage fields written per workload hour (money in the price book's currency)
ROLLUP_FIELDS = (
    "energy_joules",
    "idle_energy_joules",
    "active_seconds",
    "idle_seconds",
    "unknown_seconds",
    "cost",
    "idle_cost",
    "carbon_grams",
)

_BATCH_DECODER = msgspec.json.Decoder(Batch)
#: influxdb-client is untyped: its Point builder is used through Any
_new_point: Callable[[str], Any] = Point


def timestamp_nanoseconds(unix_seconds: float) -> int:
    """Unix seconds to integer nanoseconds; whole seconds stay exact at any magnitude."""
    whole = int(unix_seconds // 1)
    return whole * 1_000_000_000 + round((unix_seconds - whole) * 1e9)


def batch_lines(body: bytes) -> list[str]:
    """One ``gpu`` line per sample of a batch body as the ledger keeps it (JSON, gzipped
    or not)."""
    batch = _BATCH_DECODER.decode(batch_json(body))
    models = {info.uuid: info.name for info in batch.gpus}
    return [sample_point(batch.node, models.get(s.gpu_uuid, ""), s) for s in batch.samples]


def sample_point(node: str, model: str, sample: GpuSample) -> str:
    point = (
        _new_point(SAMPLE_MEASUREMENT)
        .tag("node", node)
        .tag("uuid", sample.gpu_uuid)
        .tag("model", model)
        .tag("workload", ",".join(sorted({w.key for w in sample.workloads})))
        .field("healthy", sample.healthy)
        .time(timestamp_nanoseconds(sample.timestamp), "ns")
    )
    for name in SAMPLE_FIELDS:
        value = getattr(sample, name)
        if value is not None:
            point.field(name, value)
    return str(point.to_line_protocol())


def rollup_lines(
    hour_start: float, rows: Iterable[tuple[WorkloadRef, Usage]], currency: str
) -> list[str]:
    """One ``workload_hour`` line per workload for the hour starting at ``hour_start``."""
    return [rollup_point(hour_start, ref, usage, currency) for ref, usage in rows]


def rollup_point(hour_start: float, ref: WorkloadRef, usage: Usage, currency: str) -> str:
    point = (
        _new_point(ROLLUP_MEASUREMENT)
        .tag("workload", ref.key)
        .tag("kind", ref.kind)
        .tag("namespace", ref.namespace)
        .tag("team", ref.team)
        .tag("currency", currency)
        .time(timestamp_nanoseconds(hour_start), "ns")
    )
    for name in ROLLUP_FIELDS:
        point.field(name, float(getattr(usage, name)))
    return str(point.to_line_protocol())
