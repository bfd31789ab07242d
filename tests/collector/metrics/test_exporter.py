"""The collector's Prometheus exporter and its catalogue, against hand-computed figures."""

from __future__ import annotations

import os
import re
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families

from collector.backend import EnergyTotal, FleetRates, FleetTotals, IngestCounters, WasteTotal
from collector.config import CollectorSettings, ServerSettings
from collector.http.app import create_app
from collector.influx.hooks import InfluxSinkMetrics
from collector.influx.sink import SinkCounters
from collector.metrics.catalogue import (
    ADMISSION,
    AUTH,
    CATALOGUE,
    INFLUX,
    KUBE,
    NOTIFY,
    PLANS,
    REPLICA,
    SAVINGS,
)
from collector.metrics.exporter import RatesExporter, backend_exporters
from collector.metrics.fleet_families import WORKLOAD_SERIES_TTL_SECONDS
from collector.notify.stats import NotifyExporter, NotifyStats
from collector.records import (
    GpuState,
    GpuView,
    RecommendationKind,
    RecommendationStatus,
    WorkloadRef,
)
from tests.collector.http.test_app_fake import NOW, AsgiClient, FakeBackend, make_recommendation
from tests.paths import FIXTURES

GOLDEN = FIXTURES / "collector" / "metrics.golden.txt"
POD = WorkloadRef(key="pod:ml/notebook-7", kind="kubernetes_pod", name="notebook-7",
                  namespace="ml", team="vision")  # fmt: skip
PROC = WorkloadRef(key="process:4242", kind="process", name="python")
JOB = WorkloadRef(key="slurm:991", kind="slurm_job", name="991", namespace="physics")
#: what the collector's price book and carbon settings say now (see test_exporter_rates)
RATES = FleetRates("CNY", 33.5, 1.25, {"CN": 581.0, "world": 475.0})


class FixedRates:
    """A RatesSource answering the same rates; ``fail`` makes it raise."""

    def __init__(self, rates: FleetRates, fail: bool = False) -> None:
        self.rates, self.fail, self.calls = rates, fail, 0

    def fleet_rates(self, now: float) -> FleetRates:
        self.calls += 1
        if self.fail:
            raise RuntimeError("price book gone")
        return self.rates


def fleet_backend() -> FakeBackend:
    def view(uuid: str, index: int, state: GpuState, **fields: object) -> GpuView:
        node, model = fields.pop("node", "n1"), fields.pop("model", "H100")
        return GpuView(uuid=uuid, node=node, index=index, model=model, name=f"NVIDIA {model}",
                       state=state, last_seen=NOW - 1, **fields)  # type: ignore[arg-type]  # fmt: skip

    views = [
        view("GPU-1", 0, GpuState.ALLOCATED_IDLE, workloads=(PROC, POD), idle_since=NOW - 600,
             sm_activity=0.0, power_watts=70.0),
        view("GPU-2", 1, GpuState.ACTIVE, workloads=(JOB,), sm_activity=0.9, power_watts=650.0),
        view("GPU-3", 0, GpuState.UNKNOWN, node="n2", model="L4", sm_activity=0.5,
             power_watts=50.0),
        view("GPU-4", 1, GpuState.UNALLOCATED, node="n2", model="L4", idle_since=NOW - 60,
             sm_activity=0.0, power_watts=16.0),
        view("MIG-1", 2, GpuState.ACTIVE, mig_parent_uuid="GPU-X", mig_profile="1g.10gb",
             sm_activity=0.6, power_watts=99.0),
    ]  # fmt: skip
    totals = FleetTotals(
        currency="CNY",
        waste=(
            WasteTotal("ml", "pod:ml/notebook-7", "vision", "H100", 3600.0, 20.0),
            WasteTotal("ml", "pod:ml/notebook-7", "vision", "H100", 1800.0, 10.0),
            WasteTotal("", "", "", "L4", 7200.0, 8.0),
        ),
        energy=(
            EnergyTotal("ml", "pod:ml/notebook-7", "vision", 3.6e6, 480.0, 1.2e6),
            EnergyTotal("ml", "pod:ml/notebook-7", "vision", 0.4e6, 20.0, 0.0),
            EnergyTotal("", "", "", 7.2e6, 950.0, 0.0),
        ),
        ingest=IngestCounters(
            batches_accepted=10,
            batches_duplicate=2,
            batches_rejected={"invalid_value": 3, "too_large": 1},
            samples_accepted=80,
            samples_rejected={"invalid_value": 24},
            late_samples=5,
            late_samples_by_reason={"behind_applied": 4, "duplicate_timestamp": 1},
            implausible_samples={"energy_joules": 2},
            ingest_seconds=0.25,
        ),
        intake_corrupt_records=1,
    )
    dismissed = make_recommendation("r3", RecommendationKind.RELEASE_IDLE, 5000.0)
    recs = {
        "r1": make_recommendation("r1", RecommendationKind.RELEASE_IDLE, 900.0),
        "r2": make_recommendation("r2", RecommendationKind.RELEASE_IDLE, 100.0),
        "r3": replace(dismissed, status=RecommendationStatus.DISMISSED),
    }
    offsets = {"n1": -120.25, "n2": 400.0}  # n1 behind the collector's clock, n2 ahead
    return FakeBackend(views=views, recs=recs, totals=totals, clock_offsets=offsets)


def scrape(backend: FakeBackend, rates: FixedRates | None = None) -> str:
    registry = CollectorRegistry()
    for exporter in backend_exporters(backend, clock=lambda: NOW):
        registry.register(exporter)
    registry.register(RatesExporter(rates or FixedRates(RATES), clock=lambda: NOW))
    return generate_latest(registry).decode()


def samples(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """sample name -> {sorted label items: value}"""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for metric in text_string_to_metric_families(text):
        for sample in metric.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def value(found: dict, name: str, **labels: str) -> float:
    return found[name][tuple(sorted(labels.items()))]


def test_gpus_by_state_and_model_include_zero_states() -> None:
    found = samples(scrape(fleet_backend()))
    assert value(found, "gpufleet_fleet_gpus", state="allocated_idle", model="H100") == 1
    assert value(found, "gpufleet_fleet_gpus", state="active", model="H100") == 2
    assert value(found, "gpufleet_fleet_gpus", state="unallocated", model="H100") == 0
    assert value(found, "gpufleet_fleet_gpus", state="unknown", model="L4") == 1
    assert sum(found["gpufleet_fleet_gpus"].values()) == 5


def test_fleet_utilisation_and_power_leave_out_stale_gpus_and_mig_power() -> None:
    found = samples(scrape(fleet_backend()))
    # GPU-3 is unknown (stale); MIG-1's activity counts, its power is its parent's
    assert value(found, "gpufleet_fleet_utilisation_ratio") == pytest.approx(1.5 / 4)
    assert value(found, "gpufleet_fleet_power_watts") == pytest.approx(70 + 650 + 16)


def test_each_gpu_has_its_state_and_idle_time_labelled_by_its_primary_workload() -> None:
    found = samples(scrape(fleet_backend()))
    gpu1 = {"node": "n1", "gpu": "0", "uuid": "GPU-1", "model": "H100",
            "k8s_namespace_name": "ml", "workload": "pod:ml/notebook-7"}  # fmt: skip
    assert value(found, "gpufleet_gpu_state", **gpu1, state="allocated_idle") == 1
    assert value(found, "gpufleet_gpu_idle_seconds", **gpu1) == 600
    gpu4 = {"node": "n2", "gpu": "1", "uuid": "GPU-4", "model": "L4",
            "k8s_namespace_name": "", "workload": ""}  # fmt: skip
    assert value(found, "gpufleet_gpu_idle_seconds", **gpu4) == 60
    assert len(found["gpufleet_gpu_state"]) == 5
    assert set(found["gpufleet_gpu_state"].values()) == {1.0}


def test_workload_totals_sum_rows_with_the_same_labels() -> None:
    found = samples(scrape(fleet_backend()))
    pod = {"k8s_namespace_name": "ml", "workload": "pod:ml/notebook-7", "team": "vision"}
    assert value(found, "gpufleet_workload_idle_gpu_seconds_total", **pod, model="H100") == 5400
    assert value(found, "gpufleet_workload_waste_total", **pod, model="H100", currency="CNY") == 30
    unallocated = {"k8s_namespace_name": "", "workload": "", "team": "", "model": "L4"}
    assert value(found, "gpufleet_workload_waste_total", **unallocated, currency="CNY") == 8
    assert value(found, "gpufleet_workload_energy_joules_total", **pod) == 4.0e6
    assert value(found, "gpufleet_workload_estimated_energy_joules_total", **pod) == 1.2e6
    assert value(found, "gpufleet_workload_carbon_grams_total", **pod) == 500
    fleet = {"k8s_namespace_name": "", "workload": "", "team": ""}
    assert value(found, "gpufleet_workload_estimated_energy_joules_total", **fleet) == 0


def test_a_workload_gone_for_an_hour_leaves_the_counters_unallocated_rows_stay() -> None:
    backend = fleet_backend()
    old, recent = NOW - WORKLOAD_SERIES_TTL_SECONDS - 1, NOW - WORKLOAD_SERIES_TTL_SECONDS + 1
    backend.totals = replace(backend.totals, waste=(
        WasteTotal("ml", "pod:ml/done", "t", "H100", 60.0, 1.0, last_seen=old),
        WasteTotal("ml", "pod:ml/running", "t", "H100", 60.0, 1.0, last_seen=recent),
        WasteTotal("", "", "", "L4", 7200.0, 8.0),
    ), energy=(
        EnergyTotal("ml", "pod:ml/done", "t", 1.0, 1.0, last_seen=old),
        EnergyTotal("ml", "pod:ml/running", "t", 1.0, 1.0, last_seen=recent),
        EnergyTotal("", "", "", 7.2e6, 950.0),
    ))  # fmt: skip
    found = samples(scrape(backend))
    for name in ("gpufleet_workload_waste_total", "gpufleet_workload_energy_joules_total"):
        workloads = {dict(labels)["workload"] for labels in found[name]}
        assert workloads == {"pod:ml/running", ""}, name


def test_rates_are_waste_now_pue_and_intensity_per_region() -> None:
    found = samples(scrape(fleet_backend()))
    assert value(found, "gpufleet_fleet_idle_cost_per_hour", currency="CNY") == 33.5
    assert value(found, "gpufleet_carbon_pue_ratio") == 1.25
    intensity = "gpufleet_carbon_intensity_grams_per_kilowatt_hour"
    assert found[intensity] == {(("region", "CN"),): 581.0, (("region", "world"),): 475.0}


def test_failing_rates_leave_the_rest_of_the_scrape() -> None:
    source = FixedRates(RATES, fail=True)
    found = samples(scrape(fleet_backend(), source))
    assert source.calls == 1
    assert "gpufleet_carbon_pue_ratio" not in found
    assert value(found, "gpufleet_fleet_power_watts") == pytest.approx(736)


def test_open_recommendations_and_savings_by_kind() -> None:
    found = samples(scrape(fleet_backend()))
    assert value(found, "gpufleet_recommendations_open", kind="release_idle") == 2
    assert value(found, "gpufleet_recommendations_open", kind="scale_down") == 0
    savings = "gpufleet_recommendation_savings_per_month"
    assert value(found, savings, kind="release_idle", currency="CNY") == 1000
    assert len(found[savings]) == 1


def test_ingest_counters_list_every_reason() -> None:
    found = samples(scrape(fleet_backend()))
    batches = "gpufleet_collector_batches_total"
    assert value(found, batches, result="accepted") == 10
    assert value(found, batches, result="duplicate") == 2
    assert value(found, batches, result="rejected") == 4
    rejected = "gpufleet_collector_rejected_batches_total"
    assert value(found, rejected, reason="invalid_value") == 3
    assert value(found, rejected, reason="unknown_gpu") == 0
    assert value(found, "gpufleet_collector_rejected_samples_total", reason="invalid_value") == 24
    assert value(found, "gpufleet_collector_samples_total") == 80
    late = "gpufleet_collector_late_samples_total"
    assert value(found, late, reason="behind_applied") == 4
    assert value(found, late, reason="duplicate_timestamp") == 1
    implausible = "gpufleet_collector_implausible_samples_total"
    assert value(found, implausible, field="energy_joules") == 2
    assert value(found, "gpufleet_collector_ingest_seconds_total") == 0.25
    assert value(found, "gpufleet_collector_pending_samples") == 7
    assert value(found, "gpufleet_collector_ledger_up") == 1
    assert "gpufleet_collector_last_ingest_timestamp_seconds" not in found  # nothing yet


def test_every_emitted_family_is_in_the_catalogue_with_its_labels_and_type() -> None:
    specs = {spec.name: spec for spec in CATALOGUE}
    emitted = set()
    for metric in text_string_to_metric_families(scrape(fleet_backend())):
        name = metric.name + ("_total" if metric.type == "counter" else "")
        spec = specs[name]
        emitted.add(name)
        assert (metric.type, metric.documentation) == (spec.type, spec.help)
        for sample in metric.samples:
            assert set(sample.labels) == set(spec.labels), name
    # a family with nothing to say still has its HELP; the notifier, InfluxDB sink, auth,
    # admission, plans, savings, Kubernetes reader and replica families come from their own
    # collectors (tested below, in tests/collector/http/test_scopes.py, test_admission.py,
    # test_plans_exporter.py, tests/cli/test_kube_metadata.py and test_replica_scope.py)
    own = (*NOTIFY, *INFLUX, *AUTH, *ADMISSION, *PLANS, *SAVINGS, *KUBE, *REPLICA)
    assert emitted == set(specs) - {spec.name for spec in own}


class _FixedSink:
    def counters(self) -> SinkCounters:
        return SinkCounters(enqueued=10, written=6, dropped={"overflow": 3}, queued=1,
                            write_failures=2)  # fmt: skip


def test_notifier_and_influx_families_are_the_catalogue_rows() -> None:
    stats = NotifyStats()
    stats.count("ops", "feishu", "ok")
    stats.mark_broken("ops", "feishu", "bad signature")
    registry = CollectorRegistry()
    registry.register(NotifyExporter(stats, {"ops": "feishu"}, lambda: {"ops": 2}))
    registry.register(InfluxSinkMetrics(_FixedSink()))  # type: ignore[arg-type]
    specs = {spec.name: spec for spec in (*NOTIFY, *INFLUX)}
    values = {}
    for metric in text_string_to_metric_families(generate_latest(registry).decode()):
        name = metric.name + ("_total" if metric.type == "counter" else "")
        spec = specs.pop(name)
        assert (metric.type, metric.documentation) == (spec.type, spec.help)
        for sample in metric.samples:
            if not sample.name.endswith("_created"):
                assert set(sample.labels) == set(spec.labels), name
                values[(sample.name, tuple(sorted(sample.labels.values())))] = sample.value
    assert specs == {}
    assert values[("gpufleet_notify_channel_broken", ("feishu", "ops"))] == 1
    assert values[("gpufleet_notify_outbox_pending", ("ops",))] == 2
    assert values[("gpufleet_influx_points_dropped_total", ("overflow",))] == 3
    assert values[("gpufleet_influx_points_dropped_total", ("rejected",))] == 0
    assert values[("gpufleet_influx_points_written_total", ())] == 6


def test_catalogue_names_follow_the_prometheus_conventions() -> None:
    names = [spec.name for spec in CATALOGUE]
    assert len(names) == len(set(names))
    for spec in CATALOGUE:
        assert re.fullmatch(r"gpufleet_[a-z_]+", spec.name), spec.name
        assert spec.name.endswith("_total") == (spec.type == "counter"), spec.name
        base = spec.name.removesuffix("_total")
        assert not spec.unit or base.endswith("_" + spec.unit), spec.name
        assert spec.help.endswith("."), spec.name
        assert "namespace" not in spec.labels and "pod" not in spec.labels


def test_a_failing_backend_part_leaves_the_rest_of_the_scrape() -> None:
    backend = fleet_backend()

    def broken(now: float) -> list[GpuView]:
        raise RuntimeError("database is locked")

    backend.fleet = broken  # type: ignore[method-assign]
    registry = CollectorRegistry()
    for exporter in backend_exporters(backend, clock=lambda: NOW):
        registry.register(exporter)
    generate_latest(registry)
    found = samples(generate_latest(registry).decode())
    assert "gpufleet_fleet_gpus" not in found
    assert value(found, "gpufleet_collector_batches_total", result="accepted") == 10
    assert value(found, "gpufleet_collector_export_errors_total", part="fleet") == 2


def test_registering_does_not_call_the_backend() -> None:
    class Untouchable(FakeBackend):
        def fleet(self, now: float) -> list[GpuView]:
            raise AssertionError("called at registration")

    for exporter in backend_exporters(Untouchable(), clock=lambda: NOW):
        CollectorRegistry().register(exporter)
    source = FixedRates(RATES)
    CollectorRegistry().register(RatesExporter(source, clock=lambda: NOW))
    assert source.calls == 0


def test_metrics_route_speaks_text_and_openmetrics() -> None:
    backend = fleet_backend()
    rates = RatesExporter(FixedRates(RATES), clock=lambda: NOW)
    settings = CollectorSettings(server=ServerSettings())
    client = AsgiClient(create_app(backend, settings, ["t"], lambda: NOW, collectors=[rates]))
    text = client.get("/metrics")
    assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert value(samples(text.text), "gpufleet_fleet_power_watts") == 736
    assert value(samples(text.text), "gpufleet_carbon_pue_ratio") == 1.25
    accept = "application/openmetrics-text; version=1.0.0"
    om = client.get("/metrics", headers={"Accept": accept})
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert om.text.endswith("# EOF\n")
    families = {metric.name: metric for metric in parse_om(om.text)}
    assert families["gpufleet_workload_energy_joules"].unit == "joules"
    intensity = families["gpufleet_carbon_intensity_grams_per_kilowatt_hour"]
    assert intensity.unit == "grams_per_kilowatt_hour"


def test_scrape_matches_the_golden_file() -> None:
    """Regenerate with GPUFLEET_UPDATE_GOLDEN=1 after a deliberate change, and review it."""
    text = scrape(fleet_backend())
    if os.environ.get("GPUFLEET_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
