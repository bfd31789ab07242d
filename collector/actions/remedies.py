"""Which nodes to take out of service, and why: pure functions over the fleet view and the
BROKEN_GPUS recommendations (collector/actions/remediation.py acts on them).

A fault is a GPU a recommendation names with a condition that takes a node out: off the
bus, hardware XIDs, uncorrected ECC / row remaps pending, missing from NVML. Its
fingerprint names the set of faults: the same set is the same condition, acted on once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collector.records import (
    LIVE_STATUSES,
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
)

#: how each condition reads in the reason Slurm and the node annotation keep
CONDITION_WORDS = {
    "off_bus": "fell off the bus",
    "xid": "hardware XID",
    "ecc": "uncorrectable ECC / row remap pending",
    "missing": "missing from NVML",
}
#: conditions whose GPU is silent by nature (its data cannot be fresh)
SILENT = frozenset({"off_bus", "missing"})


@dataclass(frozen=True)
class Fault:
    uuid: str
    index: int | None
    condition: str  # off_bus | xid | ecc | missing
    #: the hardware XID codes it logged (the evidence's, when it has them)
    xids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Remedy:
    node: str
    faults: tuple[Fault, ...]
    rec: Recommendation

    @property
    def fingerprint(self) -> str:
        """Names the set of broken GPUs and their conditions (the same set: the same step)."""
        text = ",".join(sorted(f"{f.uuid}={f.condition}" for f in self.faults))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def reason(self) -> str:
        """``gpufleet: GPU 3 XID 79 (fell off the bus); GPU 5 missing from NVML``."""
        order = sorted(self.faults, key=lambda f: (f.index is None, f.index or 0, f.uuid))
        parts = [f"GPU {_gpu(f)} {_words(f)}" for f in order]
        return "gpufleet: " + "; ".join(parts)


def _gpu(f: Fault) -> str:
    return str(f.index) if f.index is not None else f.uuid


def _words(f: Fault) -> str:
    """``XID 48, 63``; ``XID 79 (fell off the bus)``; ``missing from NVML``."""
    codes = "XID " + ", ".join(str(x) for x in f.xids) if f.xids else ""
    if f.condition == "xid":
        return codes or CONDITION_WORDS["xid"]
    return f"{codes} ({CONDITION_WORDS[f.condition]})" if codes else CONDITION_WORDS[f.condition]


def _listed(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def faults_of(
    rec: Recommendation, index: Mapping[str, int], conditions: Sequence[str]
) -> tuple[Fault, ...]:
    """The broken GPUs a BROKEN_GPUS recommendation names, with ``conditions`` only."""
    found: dict[str, Fault] = {}
    for b in _listed(rec.evidence.get("broken")):
        if isinstance(b, dict) and b.get("condition") in conditions:
            uuid = str(b.get("gpu"))
            xids = tuple(x for x in _listed(b.get("xids")) if isinstance(x, int))
            found.setdefault(uuid, Fault(uuid, index.get(uuid), str(b["condition"]), xids))
    for key, cond in (("lost_gpus", "off_bus"), ("missing_gpus", "missing")):
        for gpu in _listed(rec.evidence.get(key)) if cond in conditions else []:
            found.setdefault(str(gpu), Fault(str(gpu), index.get(str(gpu)), cond))
    return tuple(found[u] for u in sorted(found))


def data_fresh(
    node: str, fleet: Sequence[GpuView], faults: Sequence[Fault], now: float, max_age: float
) -> bool:
    """The node reports fresh samples now, and so does every named GPU not silent by nature."""
    views = {v.uuid: v for v in fleet if v.node == node}

    def fresh(v: GpuView) -> bool:
        seen = v.last_seen is not None and now - v.last_seen <= max_age
        return seen and v.state is not GpuState.UNKNOWN

    if not any(fresh(v) for v in views.values()):
        return False
    for f in faults:
        view = views.get(f.uuid)
        if f.condition not in SILENT and (view is None or not fresh(view)):
            return False
    return True


def executor_kind(node: str, fleet: Sequence[GpuView], via: str, enabled: Sequence[str]) -> str:
    """kubernetes | slurm | "" (none fits): ``via`` unless auto; else the node's holders say,
    else the one executor enabled."""
    if via != "auto":
        return via
    kinds = {r.key.partition(":")[0] for v in fleet if v.node == node for r in v.workloads}
    held = [k for k, key in (("slurm", "slurm"), ("kubernetes", "pod")) if key in kinds]
    if len(held) == 1:
        return held[0]
    return enabled[0] if len(enabled) == 1 else ("kubernetes" if "kubernetes" in enabled else "")


def remedies(
    fleet: Sequence[GpuView], recs: Sequence[Recommendation], conditions: Sequence[str]
) -> list[Remedy]:
    """A remedy per live BROKEN_GPUS recommendation that names an eligible condition."""
    index = {v.uuid: v.index for v in fleet}
    out = []
    for rec in recs:
        if rec.kind is not RecommendationKind.BROKEN_GPUS or rec.status not in LIVE_STATUSES:
            continue
        faults = faults_of(rec, index, conditions)
        if faults:
            out.append(Remedy(rec.node or rec.subject, faults, rec))
    return out
