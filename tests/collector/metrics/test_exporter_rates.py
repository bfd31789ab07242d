"""The rates the collector exports (waste now, PUE, grid intensity per region) and the
ledger totals behind its energy counters, from real Rates and a real collector core."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from collector.accounting.rates import Rates
from collector.analysis.carbon import HourlyFeed, IntensityRow, IntensityTable
from collector.analysis.cost import PriceBook
from collector.config import CarbonSettings, CollectorSettings
from collector.ledger.store import Ledger
from collector.metrics.exporter import RatesExporter, backend_exporters
from collector.records import GpuState, GpuView, WorkloadRef
from collector.reports import LiveRates, fleet_rates
from collector.service import CollectorCore
from tests.collector.metrics.test_exporter import samples, value

T0 = 1_767_225_600.0  # an hour boundary
PRICES = PriceBook.from_mapping(
    {
        "currency": "CNY",
        "models": {
            "H100": {"on_demand_per_gpu_hour": 20.0, "reserved_per_gpu_hour": 12.0},
            "L4": {"on_demand_per_gpu_hour": 4.0, "reserved_per_gpu_hour": 2.5},
        },
        "node_overrides": {"n2": {"L4": {"on_demand_per_gpu_hour": 3.0}}},
    }
)
TABLE = IntensityTable(
    [IntensityRow("world", 475.0, "2024", "t"), IntensityRow("DEU", 380.0, "2024", "t"),
     IntensityRow("FRA", 56.0, "2024", "t")],
    {},
    "test table",
)  # fmt: skip
CARBON = CarbonSettings(region="world", pue=1.3, node_regions={"n2": "DEU"})
POD = WorkloadRef(key="pod:ml/nb", kind="kubernetes_pod", name="nb", namespace="ml")


def view(uuid: str, node: str, model: str, state: GpuState) -> GpuView:
    return GpuView(uuid=uuid, node=node, index=0, model=model, name=model, state=state,
                   last_seen=T0)  # fmt: skip


FLEET = [
    view("G1", "n1", "H100", GpuState.ALLOCATED_IDLE),  # 20/h
    view("G2", "n1", "H100", GpuState.ACTIVE),
    view("G3", "n2", "L4", GpuState.UNALLOCATED),  # 3/h: n2's override
    view("G4", "n2", "L4", GpuState.UNKNOWN),  # unknown is never idle
    view("G5", "n3", "A100", GpuState.UNALLOCATED),  # no price: 0/h
    view("G6", "n4", "L4", GpuState.ALLOCATED_IDLE),  # 4/h
]


def test_waste_now_is_the_summed_hourly_price_of_the_gpus_idle_now() -> None:
    rates = fleet_rates(FLEET, Rates(PRICES, TABLE, CARBON), {}, T0)
    assert rates.currency == "CNY"
    assert rates.idle_cost_per_hour == pytest.approx(20 + 3 + 0 + 4)
    assert fleet_rates([], Rates(PRICES, TABLE, CARBON), {}, T0).idle_cost_per_hour == 0


def test_intensity_per_region_of_the_known_nodes_and_the_pue() -> None:
    labels = {"n3": {"region": "FRA"}, "n4": {"region": "atlantis"}, "gone": {"region": "X"}}
    rates = fleet_rates(FLEET, Rates(PRICES, TABLE, CARBON), labels, T0)
    assert rates.pue_ratio == 1.3
    # n1: default region; n2: carbon.node_regions; n3: its label; n4: an unknown region
    # is accounted at the default region's intensity, and exported as what it is
    assert rates.intensity_g_per_kwh == {"DEU": 380.0, "FRA": 56.0, "atlantis": 475.0,
                                         "world": 475.0}  # fmt: skip


def test_an_hourly_feed_sets_the_default_region_s_intensity_at_now() -> None:
    feed = HourlyFeed("world", [(T0, 300.0), (T0 + 3600, 200.0)], TABLE, "world")
    rates = Rates(PRICES, TABLE, CARBON, feed)
    assert fleet_rates(FLEET, rates, {}, T0 + 10).intensity_g_per_kwh["world"] == 300
    assert fleet_rates(FLEET, rates, {}, T0 + 3610).intensity_g_per_kwh["world"] == 200
    assert fleet_rates(FLEET, rates, {}, T0 + 7210).intensity_g_per_kwh["world"] == 475


# -- through a real collector core -------------------------------------------------------------

COUNTED = GpuInfo(uuid="GPU-c", index=0, name="NVIDIA H100 80GB HBM3")
ESTIMATED = GpuInfo(uuid="GPU-e", index=1, name="NVIDIA L4")  # no energy counter
FREE = GpuInfo(uuid="GPU-f", index=2, name="NVIDIA L4")  # no counter, nobody holds it
NB = Workload(kind=WorkloadKind.KUBERNETES_POD, id="p", name="nb", namespace="ml", team="cv")


def batch(seq: int, times: range, sm: float) -> Batch:
    """Each GPU draws 100 W (COUNTED), 50 W (ESTIMATED) and 20 W (FREE)."""
    rows = []
    for t in times:
        ts = T0 + t
        rows += [
            GpuSample(timestamp=ts, gpu_uuid=COUNTED.uuid, sm_activity=sm, dram_activity=sm,
                      power_watts=100.0, energy_joules=100.0 * t, workloads=(NB,)),
            GpuSample(timestamp=ts, gpu_uuid=ESTIMATED.uuid, sm_activity=sm, dram_activity=sm,
                      power_watts=50.0, workloads=(NB,)),
            GpuSample(timestamp=ts, gpu_uuid=FREE.uuid, sm_activity=0.0, dram_activity=0.0,
                      power_watts=20.0),
        ]  # fmt: skip
    return Batch(schema_version=SCHEMA_VERSION, node="n2", agent_boot_id="b", seq=seq,
                 sent_at=T0, gpus=(COUNTED, ESTIMATED, FREE), samples=tuple(rows))  # fmt: skip


def open_core(db: Path) -> CollectorCore:
    rates = Rates(PRICES, TABLE, CARBON)
    return CollectorCore.build(CollectorSettings(), Ledger.open(str(db)), rates, lambda: T0 + 600)


def submit(core: CollectorCore, b: Batch) -> None:
    """As the agent sends it, right after its newest sample."""
    assert (
        core.service.submit(msgspec.json.encode(b), None, T0 + 600).result(10).status == "accepted"
    )


@pytest.fixture
def core(tmp_path: Path) -> Iterator[CollectorCore]:
    c = open_core(tmp_path / "ledger.db")
    submit(c, batch(1, range(0, 600, 10), sm=0.0))  # idle throughout: 0..590 s
    c.applier.tick(flush=True)
    yield c
    c.close()
    c.ledger.close()


def scrape(core: CollectorCore) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    registry = CollectorRegistry()
    for exporter in backend_exporters(core.service, clock=lambda: T0 + 600):
        registry.register(exporter)
    rates = LiveRates(core.fleet.views, core.service.rates)
    registry.register(RatesExporter(rates, clock=lambda: T0 + 600))
    return samples(generate_latest(registry).decode())


def test_estimated_energy_is_the_power_integrated_part_per_workload(core: CollectorCore) -> None:
    found = scrape(core)
    nb = {"k8s_namespace_name": "ml", "workload": "pod:ml/nb", "team": "cv"}
    unallocated = {"k8s_namespace_name": "", "workload": "", "team": ""}
    estimated = "gpufleet_workload_estimated_energy_joules_total"
    assert value(found, "gpufleet_workload_energy_joules_total", **nb) == pytest.approx(150 * 590)
    assert value(found, estimated, **nb) == pytest.approx(50 * 590)
    assert value(found, "gpufleet_workload_energy_joules_total", **unallocated) == pytest.approx(
        20 * 590
    )
    assert value(found, estimated, **unallocated) == pytest.approx(20 * 590)


def test_rates_over_the_live_fleet(core: CollectorCore) -> None:
    found = scrape(core)
    # n2 idle: an H100 (20/h) and an L4 (3/h, n2's override) held, an L4 (3/h) unallocated
    assert value(found, "gpufleet_fleet_idle_cost_per_hour", currency="CNY") == pytest.approx(26)
    assert value(found, "gpufleet_carbon_pue_ratio") == 1.3
    intensity = "gpufleet_carbon_intensity_grams_per_kilowatt_hour"
    assert found[intensity] == {(("region", "DEU"),): 380.0}  # n2 is in DEU


def test_idle_totals_keep_the_workload_s_gpu_model_after_a_restart(tmp_path: Path) -> None:
    first = open_core(tmp_path / "ledger.db")
    submit(first, batch(1, range(0, 600, 10), sm=0.0))
    first.applier.tick(flush=True)
    before = {(w.workload, w.model): w.idle_gpu_seconds for w in first.service.fleet_totals().waste}
    first.close()
    first.ledger.close()
    second = open_core(tmp_path / "ledger.db")  # the workload is not seen again
    after = {(w.workload, w.model): w.idle_gpu_seconds for w in second.service.fleet_totals().waste}
    second.close()
    second.ledger.close()
    assert after == before
    assert after[("pod:ml/nb", "L4")] == pytest.approx(2 * 590)  # both its GPUs, idle
