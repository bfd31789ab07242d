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

The checked types subclass the wire structs, so a decoded batch is a ``Batch`` with
``GpuInfo``s and ``GpuSample``s; but msgspec structs of different classes never compare
equal, so compare a decoded one with a constructed one through ``msgspec.to_builtins``.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Annotated, Any, cast, get_args

import msgspec

from agent.model import Batch, GpuInfo, GpuSample, ProcessSample


@dataclass(frozen=True, slots=True)
class Rule:
    """What a field's value must be; ``None`` always passes ("this GPU cannot say").

    A number must be finite and within ``[ge, le]``, a string at least ``min_length``
    characters long. ``words`` end the message refusing a value: ``$.seq = -1: must be >= 0``.
    """

    words: str
    ge: float = -math.inf
    le: float = math.inf
    min_length: int = 0

    def accepts(self, value: float | str | None) -> bool:
        if value is None:
            return True
        if isinstance(value, str):
            return len(value) >= self.min_length
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
        return msgspec.Meta(**bounds)


RATIO = Rule("must be between 0 and 1", ge=0.0, le=1.0)
NON_NEGATIVE = Rule("must be a finite number >= 0", ge=0.0)
FINITE = Rule("must be a finite number")
NOT_EMPTY = Rule("must not be empty", min_length=1)

#: ``Batch``'s identity; the order of each table is the order problems are reported in
BATCH_RULES: dict[str, Rule] = {
    "node": NOT_EMPTY,
    "agent_boot_id": NOT_EMPTY,
    "seq": Rule("must be >= 0", ge=0.0),
    "sent_at": FINITE,
}
GPU_RULES: dict[str, Rule] = {
    "uuid": NOT_EMPTY,
    "power_limit_watts": NON_NEGATIVE,
    "memory_total_bytes": NON_NEGATIVE,
    "index": NON_NEGATIVE,
}
#: ``GpuSample``'s values (its timestamp is checked against the collector's clock instead)
SAMPLE_RULES: dict[str, Rule] = {
    "sm_activity": RATIO,
    "sm_occupancy": RATIO,
    "tensor_activity": RATIO,
    "dram_activity": RATIO,
    "power_watts": NON_NEGATIVE,
    "energy_joules": NON_NEGATIVE,
    "sm_clock_hertz": NON_NEGATIVE,
    "memory_clock_hertz": NON_NEGATIVE,
    "memory_used_bytes": NON_NEGATIVE,
    "memory_total_bytes": NON_NEGATIVE,
    "memory_reserved_bytes": NON_NEGATIVE,
    "throttle_reasons": NON_NEGATIVE,
    "ecc_corrected_total": NON_NEGATIVE,
    "ecc_uncorrected_total": NON_NEGATIVE,
    "remapped_rows_correctable": NON_NEGATIVE,
    "remapped_rows_uncorrectable": NON_NEGATIVE,
    "temperature_celsius": FINITE,
    "memory_temperature_celsius": FINITE,
}
PROCESS_RULES: dict[str, Rule] = {
    "pid": NON_NEGATIVE,
    "used_memory_bytes": NON_NEGATIVE,
    "sm_share": RATIO,
}


def _constrained(kind: Any, rule: Rule | None) -> Any:
    """``kind`` (a type, or an optional one) with ``rule`` as its msgspec constraint."""
    if rule is None:
        return kind
    if isinstance(kind, types.UnionType):
        (base,) = [t for t in get_args(kind) if t is not type(None)]
        return Annotated[base, rule.meta(base)] | None
    return Annotated[kind, rule.meta(kind)]


def _checked_subclass(struct: type[Any], rules: dict[str, Rule], nested: dict[str, Any]) -> Any:
    """A subclass of ``struct`` that decodes with ``rules`` as msgspec constraints, and
    with ``nested``'s types for those fields. Every field is declared again, so the
    subclass keeps ``struct``'s field order and defaults."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(struct):
        kind = nested.get(f.name) or _constrained(f.type, rules.get(f.name))
        if f.required:
            fields.append((f.name, kind))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, kind, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, kind, f.default))
    name = f"Checked{struct.__name__}"
    return msgspec.defstruct(name, fields, bases=(struct,), module=__name__)


CheckedGpuInfo = cast(type[GpuInfo], _checked_subclass(GpuInfo, GPU_RULES, {}))
CheckedProcessSample = cast(
    type[ProcessSample], _checked_subclass(ProcessSample, PROCESS_RULES, {})
)
_CHECKED_PROCESSES = tuple[CheckedProcessSample, ...]  # type: ignore[valid-type]
CheckedGpuSample = cast(
    type[GpuSample], _checked_subclass(GpuSample, SAMPLE_RULES, {"processes": _CHECKED_PROCESSES})
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
        },
    ),
)
