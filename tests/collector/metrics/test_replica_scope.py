"""Three replicas' /metrics summed equal one collector's: each GPU's per-GPU series from
its owner only, the fleet-level and per-workload series from the leader only."""

from __future__ import annotations

from collections import defaultdict

from prometheus_client import CollectorRegistry, generate_latest

from collector.metrics.exporter import backend_exporters
from collector.metrics.replica_scope import MetricScope
from collector.records import GpuView
from tests.collector.metrics.test_exporter import NOW, FakeBackend, fleet_backend, samples

SUMMED = (
    "gpufleet_gpu_state", "gpufleet_gpu_idle_seconds", "gpufleet_fleet_gpus",
    "gpufleet_fleet_power_watts", "gpufleet_workload_energy_joules_total",
    "gpufleet_recommendations_open",
)  # fmt: skip


def scrape(backend: FakeBackend, scope: MetricScope | None) -> str:
    registry = CollectorRegistry()
    for exporter in backend_exporters(backend, clock=lambda: NOW, scope=scope):
        registry.register(exporter)
    return generate_latest(registry).decode()


def summed(texts: list[str]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    total: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
    for text in texts:
        for name, series in samples(text).items():
            for labels, v in series.items():
                total[name][labels] = total[name].get(labels, 0.0) + v
    return total


def test_three_replicas_summed_equal_one_collector() -> None:
    backend = fleet_backend()
    views = backend.fleet(NOW)
    assert len(views) >= 3
    owners = {view.uuid: i % 3 for i, view in enumerate(views)}  # each GPU's shard owner

    def scope(replica: int) -> MetricScope:
        def owned(now: float) -> list[GpuView]:
            return [v for v in backend.fleet(now) if owners[v.uuid] == replica]

        return MetricScope(lambda: replica == 0, owned)

    one = samples(scrape(backend, None))
    texts = [scrape(backend, scope(r)) for r in range(3)]
    total = summed(texts)
    for name in SUMMED:
        assert one[name], name  # the fixture has series of each
        assert total[name] == one[name], name
    for follower in texts[1:]:  # no fleet-level series off the leader
        found = samples(follower)
        assert "gpufleet_fleet_gpus" not in found
        assert "gpufleet_workload_energy_joules_total" not in found
