"""Why the GPUs waste, on /metrics (issue 24): ``catalogue.VERDICTS`` from the open
bottleneck and broken_gpus recommendations.

The recommendations are the owner of these figures (the leader evaluates them once for
the fleet, DESIGN section 7), so the exporter reads them as /v1/recommendations serves
them: a verdict's money is the one in its evidence, never computed a second time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from collector.metrics import catalogue as cat
from collector.metrics.families import Family, Labels
from collector.records import OPEN_STATUSES, Recommendation, RecommendationKind


def verdict_families(recommendations: Sequence[Recommendation]) -> list[Family]:
    """Per workload and cause the bottleneck money, per node and workload and condition
    the money on broken GPUs, per short node the missing GPUs and its remaining capacity."""
    causes: dict[Labels, float] = defaultdict(float)
    faults: dict[Labels, float] = defaultdict(float)
    missing: dict[Labels, float] = {}
    crippled: dict[Labels, float] = {}
    for rec in recommendations:
        if rec.status not in OPEN_STATUSES:
            continue
        currency, ev = rec.savings.currency, rec.evidence
        if rec.kind is RecommendationKind.BOTTLENECK:
            for verdict in _items(ev.get("verdicts")):
                key = (rec.namespace, rec.workload_key, str(verdict["cause"]), currency)
                causes[key] += _number(verdict.get("money_per_hour"))
        elif rec.kind is RecommendationKind.BROKEN_GPUS:
            for gpu in _items(ev.get("broken")):
                key = (rec.node, str(gpu["workload"]), str(gpu["condition"]), currency)
                faults[key] += _number(gpu.get("money_per_hour"))
            if "expected_gpus" in ev:
                short = _number(ev["expected_gpus"]) - _number(ev.get("working_gpus"))
                missing[(rec.node,)] = short
                crippled[(rec.node, currency)] = _number(ev.get("crippled_capacity_per_hour"))
    return [
        Family(cat.WORKLOAD_BOTTLENECK_COST, causes),
        Family(cat.GPU_FAULT_COST, faults),
        Family(cat.NODE_GPUS_MISSING, missing),
        Family(cat.NODE_CRIPPLED_COST, crippled),
    ]


def _items(value: object) -> list[dict[str, object]]:
    """The evidence's list of records (a ledger read back holds plain JSON)."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
