"""The chart renders with the real Helm engine, lints clean, validates against k8s schemas."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest

from tests.helm.chart import CHART_DIR, Rendered, full_values, render

KUBERNETES_VERSIONS = ["1.29", "1.33"]
#: Prometheus Operator CRDs kubernetes-validate has no schema for; checked by hand below
CRD_GROUP = "monitoring.coreos.com/v1"


@pytest.fixture(scope="module", params=["default", "full"])
def rendered(request: pytest.FixtureRequest) -> Rendered:
    return render({} if request.param == "default" else full_values())


def test_the_bundled_engine_is_helm_4() -> None:
    assert helm.helm_sdk_version().startswith("v4.")


@pytest.mark.parametrize("values", [{}, full_values()], ids=["default", "full"])
def test_lint_is_clean_in_strict_mode(values: dict[str, Any]) -> None:
    report = helm.lint(str(CHART_DIR), values, strict=True, kube_version="v1.29.0")
    assert report["errors"] == []
    # severity 1 is "info" (only "icon is recommended"); 2 warning, 3 error
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_default_render_has_the_expected_objects(rendered: Rendered) -> None:
    kinds = set(rendered.kinds())
    for kind in ("DaemonSet", "Deployment", "Service", "ConfigMap", "Secret"):
        assert kind in kinds
    assert {"PersistentVolumeClaim", "PodDisruptionBudget", "NetworkPolicy"} <= kinds


def test_full_render_has_every_optional_object() -> None:
    kinds = set(render(full_values()).kinds())
    assert {"ServiceMonitor", "PodMonitor", "ServiceAccount", "Role", "RoleBinding"} <= kinds


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_validates_strictly(rendered: Rendered, version: str) -> None:
    known = [d for d in rendered.docs if d["apiVersion"] != CRD_GROUP]
    assert known
    for doc in known:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            where = "/".join(map(str, err.path))
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} at {where}: {err.message}")


def test_the_validator_ships_both_schema_versions() -> None:
    versions = {v.rsplit(".", 1)[0] for v in kubernetes_validate.utils.all_versions()}
    assert set(KUBERNETES_VERSIONS) <= versions


def test_the_validator_rejects_a_broken_manifest() -> None:
    """Guards the test above: a typo in a pod spec does not pass."""
    daemonset = render().one("DaemonSet")
    daemonset["spec"]["template"]["spec"]["hostPid"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, "1.29", strict=True)


def _check_monitor(doc: dict[str, Any]) -> None:
    spec = doc["spec"]
    assert spec["selector"]["matchLabels"]
    key = "endpoints" if doc["kind"] == "ServiceMonitor" else "podMetricsEndpoints"
    assert set(spec) <= {"jobLabel", "selector", "namespaceSelector", key}
    for endpoint in spec[key]:
        assert isinstance(endpoint["port"], str) and endpoint["path"] == "/metrics"
        assert endpoint["interval"].endswith("s") and endpoint["scrapeTimeout"].endswith("s")
        assert isinstance(endpoint["honorLabels"], bool)


def _check_rule(doc: dict[str, Any]) -> None:
    groups = doc["spec"]["groups"]
    assert groups
    for group in groups:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert ("alert" in rule) != ("record" in rule), rule
            assert isinstance(rule["expr"], str | int | float) and str(rule["expr"]).strip()


def test_prometheus_operator_objects_have_their_required_fields() -> None:
    docs = [d for d in render(full_values()).docs if d["apiVersion"] == CRD_GROUP]
    assert {d["kind"] for d in docs} >= {"ServiceMonitor", "PodMonitor"}
    for doc in docs:
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        if doc["kind"] == "PrometheusRule":
            _check_rule(doc)
        else:
            _check_monitor(doc)


def test_monitors_select_the_pods_and_ports_they_scrape() -> None:
    out = render(full_values())
    agent_service = out.one("Service", "-agent")
    monitor = out.one("ServiceMonitor", "-agent")
    labels = agent_service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["endpoints"][0]["port"] in {
        p["name"] for p in agent_service["spec"]["ports"]
    }
    pod_monitor = out.one("PodMonitor", "-collector")
    pod_labels = out.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_notes_say_what_to_do_next(rendered: Rendered) -> None:
    assert "kubectl -n gpu get daemonset gf-gpufleet-agent" in rendered.notes
    assert "port-forward svc/gf-gpufleet-collector" in rendered.notes
    assert "read-token" in rendered.notes and "agent-token posts batches only" in rendered.notes
