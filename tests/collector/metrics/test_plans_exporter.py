"""The plans exporter: catalogue.PLANS families from the plans report over a real ledger,
against a hand computation, built once an hour."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collector.analysis.cost import PriceBook
from collector.ledger.records import GpuRecord, LedgerWrite
from collector.ledger.store import Ledger
from collector.metrics.catalogue import PLANS
from collector.metrics.plans import PlansExporter
from collector.plans_report import PlansReport, plans_report
from collector.records import MONTH_HOURS, Usage
from collector.usage_report import ledger_period

END = 1_767_225_600.0  # an hour boundary
BOOK = PriceBook.from_mapping({"currency": "EUR", "models": {"H100": {
    "on_demand_per_gpu_hour": 10.0, "reserved_per_gpu_hour": 6.0}}})  # fmt: skip


def ledger_with_two_gpus() -> Ledger:
    """Two H100 on n1 for the 2 h before END: GPU-0 allocated both hours (active), GPU-1
    allocated in the first hour only (idle, held), unallocated in the second."""
    ledger = Ledger.open(":memory:")
    gpus = {f"G{i}": GpuRecord(f"G{i}", "n1", "H100", "H100", i, END - 7200, END) for i in (0, 1)}
    usage = {
        (END - 7200, "G0"): Usage(active_seconds=3600.0),
        (END - 3600, "G0"): Usage(active_seconds=3600.0),
        (END - 7200, "G1"): Usage(idle_seconds=3600.0, allocated_idle_seconds=3600.0),
        (END - 3600, "G1"): Usage(idle_seconds=3600.0),
    }
    ledger.commit(LedgerWrite(gpu_usage=usage, gpus=gpus))
    return ledger


def test_costs_per_month_by_scenario_and_the_target() -> None:
    """Curve d = 2, 1 over H = 2 h: f_1 = 1, f_2 = 0.5 < 0.6 -> reserve 1. Over the window:
    today (all on demand) 10 x 3 = 30; recommended 6 x 2 + 10 x 1 = 22; all on demand 30;
    all reserved 2 x 6 x 2 = 24; per month x 730 / 2."""
    ledger = ledger_with_two_gpus()
    calls: list[float] = []

    def report(start: float, end: float) -> PlansReport:
        calls.append(end)
        period = ledger_period(start, end, end)
        return plans_report(ledger, period, BOOK, max_term_months=12, utilisation_target=0.7)

    now = [END]
    registry = CollectorRegistry()
    registry.register(PlansExporter(report, 7200.0, 0.7, lambda: now[0]))
    found = {}
    specs = {spec.name: spec for spec in PLANS}
    for metric in text_string_to_metric_families(generate_latest(registry).decode()):
        spec = specs.pop(metric.name)
        assert (metric.type, metric.documentation) == (spec.type, spec.help)
        for sample in metric.samples:
            assert set(sample.labels) == set(spec.labels)
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    assert specs == {}
    month = MONTH_HOURS / 2

    def cost(scenario: str) -> float:
        key = (("currency", "EUR"), ("pool", "model:H100"), ("scenario", scenario))
        return found[("gpufleet_plan_cost_per_month", key)]

    assert cost("today") == 30 * month and cost("all_on_demand") == 30 * month
    assert cost("recommended") == 22 * month and cost("all_reserved") == 24 * month
    advised = (("plan", "1y"), ("pool", "model:H100"), ("scenario", "recommended"))
    assert found[("gpufleet_plan_reserved_gpus", advised)] == 1
    assert found[("gpufleet_fleet_utilisation_target_ratio", ())] == 0.7
    generate_latest(registry)
    now[0] = END + 1800  # the same hour: no new report
    generate_latest(registry)
    assert len(calls) == 1
    now[0] = END + 3600
    generate_latest(registry)
    assert len(calls) == 2
    ledger.close()
