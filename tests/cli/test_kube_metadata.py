"""The collector's metadata reader as the command wires it: off, on against a (fake) API
server, and on but impossible to connect (logged once, attribution goes on from labels)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from collector.kube.settings import KubeMetadataSettings
from gpufleet.cli.kube_metadata import start_metadata
from tests.collector.kube.rig import reader_settings, wait_for
from tests.fakes.kube_api import FakeKubeApi, recorded_cluster


def test_off_by_default_nothing_starts() -> None:
    assert start_metadata(KubeMetadataSettings()) == (None, None)


def test_on_without_any_way_to_reach_the_api_server_says_what_to_set(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with caplog.at_level(logging.ERROR, "gpufleet.collector"):
        assert start_metadata(KubeMetadataSettings(enabled=True)) == (None, None)
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
