"""Allowlisted pod labels on gpufleet_workload_info (kubernetes.pod_labels): from the API
server's pod where the collector reads it, else the labels the agent sent; named as
kube-state-metrics names them, bounded in count and length, never the full label set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collector.backend import EnergyTotal, FleetTotals
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.kube.labels import MAX_POD_LABELS, MAX_VALUE_CHARS, PodMetricLabels
from collector.kube.settings import KubeMetadataSettings
from collector.metrics.families import render_families
from collector.metrics.fleet_families import workload_families
from gpufleet.settings import ConfigError
from tests.collector.kube.rig import reader_settings, running, wait_for
from tests.collector.kube.test_enrich import enriched, pod
from tests.collector.kube.test_watcher import ALL
from tests.fakes.kube_api import FakeKubeApi, recorded_cluster

KEYS = keys_of(KubeMetadataSettings())
ALLOWED = ["app", "app.kubernetes.io/name", "cost-center"]
SERVE, RAY = "llm-serve-6d8f9c7b5-x2v7q", "raycluster-kuberay-head-7xwz9"
NOW = 1_767_225_600.0


@pytest.fixture
def fake() -> Iterator[FakeKubeApi]:
    server = FakeKubeApi(recorded_cluster())
    yield server
    server.close()


def test_the_api_servers_pod_labels_reach_the_info_series_and_only_the_allowed(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    settings = reader_settings(fake, tmp_path, pod_labels=ALLOWED)
    with running(settings) as watcher:
        wait_for(lambda: watcher.store.counts() == ALL)
        labels = PodMetricLabels(settings.pod_labels)
        enricher = WorkloadEnricher(KEYS, watcher.store, labels)
        # the agent sent a different app label: the API server's pod wins
        for name in (SERVE, RAY):
            enriched(enricher, pod(name, labels={"app": "from-the-agent"}))
    assert labels.names == ("label_app", "label_app_kubernetes_io_name", "label_cost_center")
    assert labels.values(f"pod:ml/{SERVE}") == ("llm-serve", "", "")
    assert labels.values(f"pod:ml/{RAY}") == ("", "kuberay", "")
    # a replica that enriched none of these pods answers from the API server's pods too
    other_replica = PodMetricLabels(settings.pod_labels, watcher.store)
    assert other_replica.values(f"pod:ml/{SERVE}") == ("llm-serve", "", "")
    assert other_replica.values("pod:ml/not-a-pod") == ("", "", "")
    assert other_replica.values("slurm:991") == ("", "", "")
    totals = FleetTotals("USD", energy=(
        EnergyTotal("ml", f"pod:ml/{SERVE}", "llm-platform", 1e6, 100.0, last_seen=NOW,
                    owner="Deployment/ml/llm-serve"),
        EnergyTotal("ml", f"pod:ml/{RAY}", "rl", 1e6, 100.0, last_seen=NOW,
                    owner="RayCluster/ml/raycluster-kuberay"),
    ))  # fmt: skip
    families = workload_families(totals, NOW, ("team",), labels)
    text = render_families([f for f in families if f.spec.name == "gpufleet_workload_info"], False)
    # as Prometheus stores them: an empty label is no label
    series = {
        frozenset((k, v) for k, v in sample.labels.items() if v)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert series == {
        frozenset({("k8s_namespace_name", "ml"), ("workload", f"pod:ml/{SERVE}"),
                   ("team", "llm-platform"), ("label_app", "llm-serve")}),
        frozenset({("k8s_namespace_name", "ml"), ("workload", f"pod:ml/{RAY}"),
                   ("team", "rl"), ("label_app_kubernetes_io_name", "kuberay")}),
    }  # never the full label set: pod-template-hash, ray.io/... stay off  # fmt: skip


def test_without_api_access_the_agents_labels_are_read_and_values_are_cut() -> None:
    labels = PodMetricLabels(["app", "cost-center"])
    enricher = WorkloadEnricher(KEYS, None, labels)
    long = "x" * (MAX_VALUE_CHARS + 50)
    enriched(enricher, pod("trainer-0", labels={"cost-center": long, "team": "vision"}))
    assert labels.values("pod:ml/trainer-0") == ("", "x" * MAX_VALUE_CHARS)
    assert labels.values("pod:ml/never-seen") == ("", "")
    # a pod that lost its labels: its entry goes, not a stale value
    enriched(enricher, pod("trainer-0", labels={}))
    assert labels.values("pod:ml/trainer-0") == ("", "")


def test_the_allowlist_is_bounded_and_names_must_not_clash() -> None:
    too_many = [f"k{i}" for i in range(MAX_POD_LABELS + 1)]
    with pytest.raises(ConfigError, match=r"kubernetes.pod_labels: at most 16 keys .*got 17"):
        KubeMetadataSettings(pod_labels=too_many)
    with pytest.raises(
        ConfigError, match=r"'app.name' and 'app/name' both become label label_app_name"
    ):
        KubeMetadataSettings(pod_labels=["app.name", "app/name"])
    with pytest.raises(ConfigError, match=r"kubernetes.pod_labels: a key is empty"):
        KubeMetadataSettings(pod_labels=["app", " "])
    KubeMetadataSettings(pod_labels=[f"k{i}" for i in range(MAX_POD_LABELS)])


def test_the_info_series_stays_under_mimirs_30_labels_at_the_bound() -> None:
    labels = PodMetricLabels([f"key-{i}" for i in range(MAX_POD_LABELS)])
    (info,) = [
        f.spec
        for f in workload_families(FleetTotals("USD"), NOW, (), labels)
        if f.spec.name == "gpufleet_workload_info"
    ]
    # + __name__, job and instance that Prometheus adds: 3 left for external labels
    assert len(info.labels) + 3 == 27
