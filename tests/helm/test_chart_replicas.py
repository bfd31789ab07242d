"""Collector replicas on PostgreSQL: a Deployment of N with a PodDisruptionBudget, the URL
from a Secret (or a CloudNativePG Cluster's), readiness on /readyz; SQLite stays one pod."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from helm_python.errors import HelmRenderError

from collector.config import CollectorSettings
from gpufleet.settings import load_settings
from tests.helm.chart import CHART_DIR, Rendered, container, env, render
from tests.helm.test_chart_render import KUBERNETES_VERSIONS

EXAMPLES = CHART_DIR / "examples"
URL = "postgresql://gpufleet:secret@db.example.com:5432/gpufleet"


def replicated(**postgresql: str) -> dict[str, Any]:
    return {"collector": {"replicas": 3, "postgresql": postgresql}}


EXISTING = render(replicated(existingSecret="ledger-url", key="url"))
CNPG = render(yaml.safe_load((EXAMPLES / "postgresql-values.yaml").read_text()))


def test_three_replicas_roll_and_are_guarded_by_a_disruption_budget() -> None:
    deployment = EXISTING.one("Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pdb = EXISTING.one("PodDisruptionBudget")["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    probe = container(EXISTING.pod_spec("Deployment"))["readinessProbe"]
    assert probe["httpGet"] == {"path": "/readyz", "port": "http"}


def test_no_volume_claim_and_no_ledger_path_with_postgresql() -> None:
    for out in (EXISTING, CNPG):
        assert "PersistentVolumeClaim" not in out.kinds()
        config = yaml.safe_load(out.configmap_file("-collector", "collector.yaml"))
        assert "url" not in config["ledger"]
        data = [v for v in out.pod_spec("Deployment")["volumes"] if v["name"] == "data"]
        assert "persistentVolumeClaim" not in data[0]


def _secret_ref(out: Rendered, name: str) -> dict[str, Any]:
    ref: dict[str, Any] = env(out.pod_spec("Deployment"))[name]["valueFrom"]
    return ref


def test_the_url_comes_from_the_named_secret_or_the_cnpg_app_secret() -> None:
    assert _secret_ref(EXISTING, "GPUFLEET_LEDGER__URL") == {
        "secretKeyRef": {"name": "ledger-url", "key": "url"}
    }
    assert _secret_ref(CNPG, "GPUFLEET_LEDGER__URL") == {
        "secretKeyRef": {"name": "gpufleet-ledger-app", "key": "uri"}
    }
    example = yaml.safe_load((EXAMPLES / "cnpg-cluster.yaml").read_text())
    assert (example["kind"], example["apiVersion"]) == ("Cluster", "postgresql.cnpg.io/v1")
    assert f"{example['metadata']['name']}-app" == "gpufleet-ledger-app"
    assert _secret_ref(EXISTING, "GPUFLEET_CLUSTER__REPLICA_ID") == {
        "fieldRef": {"fieldPath": "metadata.name"}
    }


def test_the_collector_reads_the_url_and_its_pod_name_from_that_env(tmp_path: Path) -> None:
    """The pod's config file plus the env the kubelet fills from the Secret and downward API."""
    path = tmp_path / "collector.yaml"
    path.write_text(EXISTING.configmap_file("-collector", "collector.yaml"))
    pod_env = {"GPUFLEET_LEDGER__URL": URL, "GPUFLEET_CLUSTER__REPLICA_ID": "gf-collector-x1"}
    settings = load_settings(CollectorSettings, path, pod_env)
    assert settings.ledger.url == URL
    assert settings.cluster.replica_id == "gf-collector-x1"
    assert settings.cluster.shard_count == 64


def test_extra_env_is_kept_beside_the_chart_s() -> None:
    values = replicated(existingSecret="ledger-url")
    values["collector"]["extraEnv"] = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    names = set(env(render(values).pod_spec("Deployment")))
    chart = {"GPUFLEET_LEDGER__URL", "GPUFLEET_CLUSTER__REPLICA_ID", "GPUFLEET_CLUSTER__ENABLED"}
    assert names == chart | {"PYTHONUNBUFFERED"}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_replicated_render_validates_strictly(version: str) -> None:
    for out in (EXISTING, CNPG):
        for doc in out.docs:
            if doc["apiVersion"] != "monitoring.coreos.com/v1":
                kubernetes_validate.validate(doc, version, strict=True)


def test_the_replicated_values_lint_clean() -> None:
    values = replicated(existingSecret="ledger-url")
    report = helm.lint(str(CHART_DIR), values, strict=True, kube_version="v1.29.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_more_than_one_sqlite_replica_is_refused_with_what_to_do() -> None:
    with pytest.raises(HelmRenderError, match=r"collector.replicas: 3 collectors need a shared"):
        render({"collector": {"replicas": 3}})
    with pytest.raises(HelmRenderError, match=r"existingSecret or cnpgCluster, not both"):
        render(replicated(existingSecret="a", cnpgCluster="b"))


def test_sqlite_stays_one_recreated_pod_on_its_claim_whatever_replicas_says() -> None:
    out = render({"collector": {"replicas": 1}})
    deployment = out.one("Deployment")
    assert (deployment["spec"]["replicas"], deployment["spec"]["strategy"]) == (
        1,
        {"type": "Recreate"},
    )
    assert "PersistentVolumeClaim" in out.kinds()
    assert "GPUFLEET_LEDGER__URL" not in env(out.pod_spec("Deployment"))
