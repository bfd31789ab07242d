"""The collector's metadata reader as the command wires it: off, on against a (fake) API
server, and on but impossible to connect (logged once, attribution goes on from labels)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from collector.kube.metrics import KubeReaderMetrics
from collector.kube.settings import KubeMetadataSettings
from collector.metrics import catalogue as cat
from gpufleet.cli.kube_metadata import start_metadata
from tests.collector.kube.rig import reader_settings, wait_for
from tests.fakes.kube_api import TOKEN, FakeKubeApi, recorded_cluster


def test_off_by_default_nothing_starts() -> None:
    enricher, watcher = start_metadata(KubeMetadataSettings(pod_labels=["app"]))
    assert watcher is None and enricher.store is None  # the agents' labels only
    assert enricher.pod_labels.names == ("label_app",)


def test_on_without_any_way_to_reach_the_api_server_says_what_to_set(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with caplog.at_level(logging.ERROR, "gpufleet.collector"):
        enricher, watcher = start_metadata(KubeMetadataSettings(enabled=True))
        assert watcher is None and enricher.store is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith("kubernetes.enabled is set but no API connection can be configured")
    assert "kubernetes.host and token_file, or kubernetes.kubeconfig" in message


def test_on_the_enricher_reads_the_watched_cluster(tmp_path: Path) -> None:
    fake = FakeKubeApi(recorded_cluster())
    try:
        enricher, watcher = start_metadata(reader_settings(fake, tmp_path))
        assert enricher is not None and watcher is not None
        store = enricher.store
        assert store is not None
        wait_for(lambda: store.attribution("ml", "bert-finetune-worker-0") is not None)
        found = store.attribution("ml", "bert-finetune-worker-0")
        assert found is not None and found.owner == "PyTorchJob/ml/bert-finetune"
        watcher.close()
    finally:
        fake.close()


def test_a_kubeconfig_file_reaches_the_api_server(tmp_path: Path) -> None:
    fake = FakeKubeApi(recorded_cluster())
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        f"clusters: [{{name: lab, cluster: {{server: '{fake.host}'}}}}]\n"
        f"users: [{{name: reader, user: {{token: {TOKEN}}}}}]\n"
        "contexts: [{name: lab, context: {cluster: lab, user: reader}}]\n",
        encoding="utf-8",
    )
    try:
        enricher, watcher = start_metadata(KubeMetadataSettings(enabled=True, kubeconfig=config))
        assert enricher is not None and enricher.store is not None and watcher is not None
        store = enricher.store
        wait_for(lambda: store.attribution("default", "debug-shell") is not None)
        watcher.close()
    finally:
        fake.close()


def test_the_readers_counters_reach_metrics(tmp_path: Path) -> None:
    fake = FakeKubeApi(recorded_cluster())
    fake.forbid.add("jobs")
    try:
        enricher, watcher = start_metadata(reader_settings(fake, tmp_path, max_pods=4))
        assert enricher is not None and enricher.store is not None and watcher is not None
        store = enricher.store
        wait_for(lambda: store.counts()["pods"] == 4 and watcher.dra == "v1")
        jobs = next(w for w in watcher.watches if w.resource == "jobs")
        wait_for(lambda: jobs.stats.failures >= 1)
        # the claims' watch starts after discovery: its first list may still be under way
        claims = next(w for w in watcher.watches if w.resource == "resourceclaims")
        wait_for(lambda: claims.stats.lists >= 1)
        families = list(KubeReaderMetrics(store, watcher.watches).collect())
        exported = {
            (s.name, s.labels.get("resource")): s.value for m in families for s in m.samples
        }
        specs = {spec.name: spec for spec in cat.KUBE}
        for m in families:  # each family is its catalogue row
            spec = specs[m.name + ("_total" if m.type == "counter" else "")]
            assert (m.type, m.documentation) == (spec.type, spec.help)
            assert all(tuple(s.labels) == spec.labels for s in m.samples)
        watcher.close()
    finally:
        fake.close()
    assert exported[("gpufleet_kube_objects", "pods")] == 4
    assert exported[("gpufleet_kube_dropped_objects_total", "pods")] == 2
    assert exported[("gpufleet_kube_lists_total", "resourceclaims")] >= 1
    assert exported[("gpufleet_kube_failures_total", "jobs")] >= 1
    assert exported[("gpufleet_kube_failures_total", "pods")] == 0
