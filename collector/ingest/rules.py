"""The value rules of an agent batch, in one table: per field, its bounds and the words of
the message that refuses a value breaking them.

The table is read twice, and nothing else bounds or words a value. It builds the msgspec
constraints of ``CheckedBatch``, the type ``decode.parse_batch`` decodes a body into first,
so msgspec checks every rule in C while it parses. And ``decode.validate_batch`` applies it
in Python, through ``Rule.accepts``, to name each bad value (JSON path, value, GPU, the
rule's words) in a batch that did not come through that decoder: a body that broke a
constraint and was decoded again as a plain ``Batch``, or a batch built in code. Rules that
involve more than one value (timestamps against the collector's clock, a GPU listed twice,
a sample of an unlisted GPU) are the walk's own.

Every field is bounded twice over: by what the ledger stores (integers up to ``INT64_MAX``:
a larger one would fail every commit that holds it, for the whole fleet) and by what a
batch may sensibly carry (string lengths, list and label counts, which also keep a batch's
record within the batch log's framing); numbers too by what a GPU physically reports
(collector/analysis/physical.py). Whatever documents the API reads the bounds from here.

The checked types subclass the wire structs, so a decoded batch is a ``Batch`` with
``GpuInfo``s and ``GpuSample``s; but msgspec structs of different classes never compare
equal, so compare a decoded one with a constructed one through ``msgspec.to_builtins``.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, cast, get_args, get_origin

import msgspec

from agent.model import Batch, GpuInfo, GpuSample, ProcessSample, Workload, WorkloadHostSample
from collector.analysis.physical import (
    MAX_CELSIUS,
    MAX_POWER_WATTS,
    MIN_CELSIUS,
    UNRATED_MAX_WATTS,
)

#: the largest integer the ledger stores (SQLite's INTEGER and PostgreSQL's BIGINT are
#: signed 64-bit): a larger one would fail the commit that holds it
INT64_MAX = 2**63 - 1
#: characters of a node name (a Kubernetes node name is a DNS name: at most 253), and of a
#: workload's names (Kubernetes object names, Slurm ids, users, teams)
NAME_CHARS = 253
#: characters of an identifier: a boot id, a GPU or MIG uuid (~40-60 as NVML writes them)
ID_CHARS = 128
#: characters of any other text: model names, versions, a process name, a label key or value
TEXT_CHARS = 1024
#: entries of one batch: its GPUs (a node's boards and MIG instances), its samples
MAX_GPUS = 1024
MAX_SAMPLES = 100_000
#: entries of one sample or label set
MAX_PROCESSES = 1024
MAX_WORKLOADS = 64
MAX_XIDS = 256
MAX_LABELS = 64


@dataclass(frozen=True, slots=True)
class Rule:
    """What a field's value must be; ``None`` always passes ("this GPU cannot say").

    A number must be finite and within ``[ge, le]``; a string ``min_length`` to
    ``max_length`` characters long; a tuple or dict at most ``max_length`` entries, each
    (every key and value of a dict) held to ``each``. ``words`` end the message refusing
    a value: ``$.seq = -1: must be from 0 to ...``.
    """

    words: str
    ge: float = -math.inf
    le: float = math.inf
    min_length: int = 0
    max_length: int | None = None
    each: Rule | None = None

    def accepts(self, value: object) -> bool:
        if value is None:
            return True
        if isinstance(value, str | tuple | dict):
            return self.min_length <= len(value) <= (self.max_length or len(value))
        assert isinstance(value, int | float)
        return self.ge <= value <= self.le and -math.inf < value < math.inf  # NaN fails

    def meta(self, base: type) -> msgspec.Meta:
        """This rule as a msgspec constraint on a field of type ``base``. It needs no
        finiteness bound: JSON has no NaN or infinity, and msgspec refuses a number beyond
        float range, so every float it decodes is finite."""
        bounds: dict[str, Any] = {}
        if self.ge > -math.inf:
            bounds["ge"] = base(self.ge)
        if self.le < math.inf:
            bounds["le"] = base(self.le)
        if self.min_length:
            bounds["min_length"] = self.min_length
        if self.max_length is not None:
            bounds["max_length"] = self.max_length
        return msgspec.Meta(**bounds)


RATIO = Rule("must be between 0 and 1", ge=0.0, le=1.0)
NON_NEGATIVE = Rule("must be a finite number >= 0", ge=0.0)
FINITE = Rule("must be a finite number")
#: an integer the ledger can hold: counts, bytes, bitmasks, pids, indexes
COUNT = Rule(
    f"must be an integer from 0 to {INT64_MAX} (what the ledger stores)", ge=0, le=INT64_MAX
)
NODE_NAME = Rule(
    f"must be 1 to {NAME_CHARS} characters (a Kubernetes node name)",
    min_length=1,
    max_length=NAME_CHARS,
)
NAME = Rule(f"must be at most {NAME_CHARS} characters", max_length=NAME_CHARS)
ID = Rule(f"must be 1 to {ID_CHARS} characters", min_length=1, max_length=ID_CHARS)
OPTIONAL_ID = Rule(f"must be at most {ID_CHARS} characters", max_length=ID_CHARS)
TEXT = Rule(f"must be at most {TEXT_CHARS} characters", max_length=TEXT_CHARS)
LABELS = Rule(f"must have at most {MAX_LABELS} labels", max_length=MAX_LABELS, each=TEXT)
CELSIUS = Rule(
    f"must be from {MIN_CELSIUS:g} to {MAX_CELSIUS:g} degC", ge=MIN_CELSIUS, le=MAX_CELSIUS
)
#: clocks in hertz: no GPU clock runs at 10 GHz
HERTZ = Rule("must be from 0 to 1e10 Hz", ge=0.0, le=1e10)
#: link throughput: no PCIe or NVLink link moves 10 TB/s
BYTES_PER_SECOND = Rule("must be from 0 to 1e13 bytes/s", ge=0.0, le=1e13)
#: a PCIe link's generation (1..7) or lane count (1..32)
PCIE_GENERATION = Rule("must be a PCIe generation from 1 to 7", ge=1, le=7)
PCIE_WIDTH = Rule("must be a PCIe link width from 1 to 32 lanes", ge=1, le=32)
#: CPU cores of one workload: no host has a million
CORES = Rule("must be from 0 to 1e6 CPU cores", ge=0.0, le=1e6)
MAX_HOSTS = 1024

#: ``Batch``'s identity; the order of each table is the order problems are reported in
BATCH_RULES: dict[str, Rule] = {
    "node": NODE_NAME,
    "agent_boot_id": ID,
    "seq": COUNT,
    "sent_at": FINITE,
    "gpus": Rule(f"must list at most {MAX_GPUS} GPUs", max_length=MAX_GPUS),
    "samples": Rule(
        f"must carry at most {MAX_SAMPLES} samples: send smaller batches "
        "(the agent's shipper.max_samples_per_batch)",
        max_length=MAX_SAMPLES,
    ),
    "agent_version": TEXT,
    "node_labels": LABELS,
    "hosts": Rule(f"must list at most {MAX_HOSTS} workload host samples", max_length=MAX_HOSTS),
}
GPU_RULES: dict[str, Rule] = {
    "uuid": ID,
    "index": COUNT,
    "name": TEXT,
    "architecture": TEXT,
    "memory_total_bytes": COUNT,
    "pci_bus_id": TEXT,
    "mig_parent_uuid": OPTIONAL_ID,
    "mig_profile": TEXT,
    "mig_gpu_instance_id": COUNT,
    "driver_version": TEXT,
    "cuda_version": TEXT,
    "power_limit_watts": Rule(
        f"must be from 0 to {UNRATED_MAX_WATTS:g} W (no GPU is rated higher)",
        ge=0.0,
        le=UNRATED_MAX_WATTS,
    ),
}
#: ``GpuSample``'s values (its timestamp is checked against the collector's clock instead;
#: its power against its GPU's rating too, in decode.py)
SAMPLE_RULES: dict[str, Rule] = {
    "gpu_uuid": ID,
    "sm_activity": RATIO,
    "sm_occupancy": RATIO,
    "tensor_activity": RATIO,
    "dram_activity": RATIO,
    "encoder_activity": RATIO,
    "decoder_activity": RATIO,
    "power_watts": Rule(
        f"must be from 0 to {MAX_POWER_WATTS:g} W (no GPU draws more)", ge=0.0, le=MAX_POWER_WATTS
    ),
    "energy_joules": NON_NEGATIVE,
    "temperature_celsius": CELSIUS,
    "memory_temperature_celsius": CELSIUS,
    "memory_used_bytes": COUNT,
    "memory_total_bytes": COUNT,
    "memory_reserved_bytes": COUNT,
    "sm_clock_hertz": HERTZ,
    "memory_clock_hertz": HERTZ,
    "throttle_reasons": COUNT,
    "xid_errors": Rule(f"must list at most {MAX_XIDS} XIDs", max_length=MAX_XIDS, each=COUNT),
    "ecc_corrected_total": COUNT,
    "ecc_uncorrected_total": COUNT,
    "remapped_rows_correctable": COUNT,
    "remapped_rows_uncorrectable": COUNT,
    "processes": Rule(f"must list at most {MAX_PROCESSES} processes", max_length=MAX_PROCESSES),
    "workloads": Rule(f"must list at most {MAX_WORKLOADS} workloads", max_length=MAX_WORKLOADS),
    "error": TEXT,
    "pcie_tx_bytes_per_second": BYTES_PER_SECOND,
    "pcie_rx_bytes_per_second": BYTES_PER_SECOND,
    "nvlink_tx_bytes_per_second": BYTES_PER_SECOND,
    "nvlink_rx_bytes_per_second": BYTES_PER_SECOND,
    "fp64_activity": RATIO,
    "fp32_activity": RATIO,
    "fp16_activity": RATIO,
    "pcie_link_generation": PCIE_GENERATION,
    "pcie_link_width": PCIE_WIDTH,
    "pcie_link_generation_max": PCIE_GENERATION,
    "pcie_link_width_max": PCIE_WIDTH,
    "pcie_replays_total": COUNT,
    "fan_speed_ratio": RATIO,
    "retired_pages_total": COUNT,
    "sm_clock_default_hertz": HERTZ,
}
#: ``WorkloadHostSample``'s values (its timestamp is checked like a sample's)
HOST_RULES: dict[str, Rule] = {
    "workload_key": TEXT,
    "cpu_used_cores": CORES,
    "cpu_limit_cores": CORES,
    "cpu_throttled_ratio": RATIO,
    "memory_pressure_ratio": RATIO,
    "memory_used_bytes": COUNT,
    "memory_limit_bytes": COUNT,
}
PROCESS_RULES: dict[str, Rule] = {
    "pid": COUNT,
    "used_memory_bytes": COUNT,
    "sm_share": RATIO,
    "type": TEXT,
    "name": TEXT,
}
#: ``Workload``'s names, on a sample and on a process
WORKLOAD_RULES: dict[str, Rule] = {
    "id": NAME,
    "name": NAME,
    "namespace": NAME,
    "container": NAME,
    "slurm_job_id": NAME,
    "user": NAME,
    "team": NAME,
    "labels": LABELS,
    "gpu_sharing": NAME,
    "gpu_share": RATIO,
}


def _constrained(kind: Any, rule: Rule | None) -> Any:
    """``kind`` (a type, or an optional one) with ``rule`` as its msgspec constraint, and
    ``rule.each`` on its entries (a tuple's items, a dict's keys and values)."""
    if rule is None:
        return kind
    if isinstance(kind, types.UnionType):
        (base,) = [t for t in get_args(kind) if t is not type(None)]
        return _constrained(base, rule) | None
    origin = get_origin(kind) or kind
    if rule.each is not None:
        args = get_args(kind)
        if origin is tuple:
            kind = tuple[_constrained(args[0], rule.each), ...]  # type: ignore[misc]
        else:
            kind = dict[_constrained(args[0], rule.each), _constrained(args[1], rule.each)]  # type: ignore[misc]
    base = origin if origin in (int, float) else None
    return Annotated[kind, rule.meta(base or int)]


def _checked_subclass(struct: type[Any], rules: dict[str, Rule], nested: dict[str, Any]) -> Any:
    """A subclass of ``struct`` that decodes with ``rules`` as msgspec constraints, and
    with ``nested``'s types for those fields. Every field is declared again, so the
    subclass keeps ``struct``'s field order and defaults."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(struct):
        kind = _constrained(nested.get(f.name, f.type), rules.get(f.name))
        if f.required:
            fields.append((f.name, kind))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, kind, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, kind, f.default))
    name = f"Checked{struct.__name__}"
    return msgspec.defstruct(name, fields, bases=(struct,), module=__name__)


CheckedWorkload = cast(type[Workload], _checked_subclass(Workload, WORKLOAD_RULES, {}))
CheckedProcessSample = cast(
    type[ProcessSample],
    _checked_subclass(ProcessSample, PROCESS_RULES, {"workload": CheckedWorkload | None}),
)
CheckedGpuInfo = cast(type[GpuInfo], _checked_subclass(GpuInfo, GPU_RULES, {}))
CheckedGpuSample = cast(
    type[GpuSample],
    _checked_subclass(
        GpuSample,
        SAMPLE_RULES,
        {
            "processes": tuple[CheckedProcessSample, ...],  # type: ignore[valid-type]
            "workloads": tuple[CheckedWorkload, ...],  # type: ignore[valid-type]
        },
    ),
)
CheckedWorkloadHostSample = cast(
    type[WorkloadHostSample], _checked_subclass(WorkloadHostSample, HOST_RULES, {})
)
#: a Batch that msgspec held to every rule of the table while decoding it
CheckedBatch = cast(
    type[Batch],
    _checked_subclass(
        Batch,
        BATCH_RULES,
        {
            "gpus": tuple[CheckedGpuInfo, ...],  # type: ignore[valid-type]
            "samples": tuple[CheckedGpuSample, ...],  # type: ignore[valid-type]
            "hosts": tuple[CheckedWorkloadHostSample, ...],  # type: ignore[valid-type]
        },
    ),
)


#: every string: PostgreSQL's text cannot hold a NUL character, so one accepted would fail
#: every commit after it (and SQLite's C API cuts strings at one); the decoder cannot
#: express it as a constraint, so decode.py walks any body that spells one (``\u0000``)
NO_NUL = Rule("must not contain a NUL character (\\u0000): the ledger cannot store one")

#: a refusal message quotes at most this much of a string
SHOWN_CHARS = 64


def breaches(
    path: str, struct: object, rules: dict[str, Rule]
) -> Iterator[tuple[str, object, Rule]]:
    """Each value of ``struct`` (at JSON path ``path``) that breaks its rule in ``rules``,
    as (the field's path, the value, the rule): a tuple's items and a dict's keys and
    values held to the rule's ``each`` are named by the container's path."""
    for name, rule in rules.items():
        value = getattr(struct, name)
        if not rule.accepts(value):
            yield f"{path}.{name}", value, rule
        elif isinstance(value, str) and "\x00" in value:
            yield f"{path}.{name}", value, NO_NUL
        elif rule.each is not None and value:
            each = rule.each
            entries = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            for v in entries:
                if not each.accepts(v):
                    yield f"{path}.{name}", v, each
                elif isinstance(v, str) and "\x00" in v:
                    yield f"{path}.{name}", v, NO_NUL


def shown(value: object) -> str:
    """``value`` as a message shows it: a long string cut short, a container by its size."""
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"
    if isinstance(value, tuple | dict):
        return f"<{len(value)} entries>"
    return repr(value)
