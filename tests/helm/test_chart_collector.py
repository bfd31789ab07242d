"""The collector: one writer on a volume, a Secret for every credential, RBAC only when it acts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from collector.config import ServerSettings
from collector.http.tokens import Token, load_tokens
from tests.helm.chart import Rendered, container, full_values, mounts, render, volume

DEFAULT = render()
FULL = render(full_values())
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def collector(out: Rendered = DEFAULT) -> dict[str, Any]:
    return out.pod_spec("Deployment")


def test_one_replica_recreated_so_sqlite_has_one_writer() -> None:
    deployment = DEFAULT.one("Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_the_ledger_lives_on_the_claim() -> None:
    ledger = yaml.safe_load(DEFAULT.configmap_file("-collector", "collector.yaml"))["ledger"]["url"]
    spec = collector()
    directory = ledger.rpartition("/")[0]
    claim = volume(spec, mounts(spec)[directory]["name"])["persistentVolumeClaim"]["claimName"]
    pvc = DEFAULT.one("PersistentVolumeClaim")
    assert claim == pvc["metadata"]["name"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "10Gi"
    full_pvc = FULL.one("PersistentVolumeClaim")["spec"]
    assert full_pvc["storageClassName"] == "fast-ssd"


def test_an_existing_claim_is_used_and_none_is_created() -> None:
    out = render({"collector": {"persistence": {"existingClaim": "ledger-disk"}}})
    assert "PersistentVolumeClaim" not in out.kinds()
    assert volume(collector(out), "data")["persistentVolumeClaim"] == {"claimName": "ledger-disk"}


def test_service_probes_and_disruption_budget_point_at_the_pod() -> None:
    pod_labels = DEFAULT.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    service = DEFAULT.one("Service", "-collector")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    pdb = DEFAULT.one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    main = container(collector())
    # liveness restarts a wedged process; readiness follows the write path (a restart
    # does not free a full disk)
    paths = {"startupProbe": "/livez", "livenessProbe": "/livez", "readinessProbe": "/readyz"}
    for probe, path in paths.items():
        assert main[probe]["httpGet"] == {"path": path, "port": "http"}
    assert main["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_runs_as_non_root_with_a_read_only_root() -> None:
    spec = collector()
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert container(spec)["securityContext"]["readOnlyRootFilesystem"] is True
    assert container(spec)["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_network_policy_admits_the_agents() -> None:
    policy = DEFAULT.one("NetworkPolicy")
    agent_labels = DEFAULT.one("DaemonSet")["spec"]["template"]["metadata"]["labels"]
    pod_labels = DEFAULT.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    [rule] = policy["spec"]["ingress"]
    selectors = [p["podSelector"]["matchLabels"] for p in rule["from"] if "podSelector" in p]
    assert any(s.items() <= agent_labels.items() for s in selectors)
    assert "NetworkPolicy" not in render({"networkPolicy": {"enabled": False}}).kinds()


def actions(**section: Any) -> dict[str, Any]:
    return {"collector": {"config": {"actions": section}}}


def test_no_rbac_unless_a_policy_enforces() -> None:
    for values in (
        {},
        actions(default={"mode": "notify"}),
        actions(policies={"ml": {"mode": "notify", "dry_run": False}}),
    ):
        out = render(values)
        assert not RBAC_KINDS & set(out.kinds()), values
        assert collector(out)["automountServiceAccountToken"] is False
        assert "serviceAccountName" not in collector(out)


def _rules(out: Rendered, kind: str) -> dict[str, set[str]]:
    """resource -> verbs, over every Role/ClusterRole of ``kind``."""
    verbs: dict[str, set[str]] = {}
    for role in out.all(kind):
        for rule in role["rules"]:
            for resource in rule["resources"]:
                verbs.setdefault(resource, set()).update(rule["verbs"])
    return verbs


#: what collector/actions/kubernetes.py says releasing needs, and nothing more
RELEASE_RBAC = {
    "pods": {"get", "delete"},
    "replicasets": {"get"},
    "deployments/scale": {"patch"},
    "statefulsets/scale": {"patch"},
}


def test_enforcing_namespaces_get_a_role_each_and_nothing_cluster_wide() -> None:
    roles = FULL.all("Role")
    # gpu-debug is a Slurm partition (rbac.skipNamespaces): no Role
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["ml-research", "ml-sandbox"]
    assert not FULL.all("ClusterRole")
    assert _rules(FULL, "Role") == RELEASE_RBAC
    account = FULL.one("ServiceAccount")["metadata"]["name"]
    assert collector(FULL)["serviceAccountName"] == account
    assert collector(FULL)["automountServiceAccountToken"] is True
    for binding in FULL.all("RoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": "gpu"}
        ]


def test_dry_run_may_look_but_not_touch() -> None:
    out = render(actions(default={"mode": "enforce"}))  # dry_run defaults to true
    binding = out.one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == out.one("ClusterRole")["metadata"]["name"]
    assert _rules(out, "ClusterRole") == {"pods": {"get"}, "replicasets": {"get"}}


def test_deleting_pods_needs_no_scale_rights() -> None:
    out = render(
        actions(default={"mode": "enforce", "dry_run": False}, kubernetes={"scale_owners": False})
    )
    assert _rules(out, "ClusterRole") == {"pods": {"get", "delete"}}


def test_the_executor_is_on_exactly_when_rbac_is(tmp_path: Any) -> None:
    for out, enabled in ((DEFAULT, False), (FULL, True)):
        text = out.configmap_file("-collector", "collector.yaml")
        assert yaml.safe_load(text)["actions"]["kubernetes"]["enabled"] is enabled


def test_every_credential_is_in_the_secret_and_none_in_a_config_map() -> None:
    secret = full_values()["secret"]
    credentials = [secret["agentToken"], secret["readToken"], secret["metricsToken"]]
    credentials += [line.split()[0] for line in secret["extraTokens"]]
    credentials += secret["webhooks"].values()
    credentials += secret["signingKeys"].values()
    for config_map in FULL.all("ConfigMap"):
        text = yaml.safe_dump(config_map)
        assert not [c for c in credentials if c in text]
    assert FULL.secret_value("collector-tokens").splitlines() == [
        f"{secret['agentToken']} agent nodes=gpu-node-* name=agents",
        f"{secret['readToken']} read name=read",
        f"{FULL.secret_value('admin-token')} read,admin name=admin",
        f"{FULL.secret_value('alertmanager-token')} alertmanager name=alertmanager",
        f"{secret['metricsToken']} metrics name=metrics",
        *secret["extraTokens"],
    ]
    assert FULL.secret_value("webhook-ops-slack") == secret["webhooks"]["ops-slack"]
    assert FULL.secret_value("signing-key-ml-feishu") == secret["signingKeys"]["ml-feishu"]
    mount = mounts(collector(FULL))["/etc/gpufleet/secrets"]
    assert (
        volume(collector(FULL), mount["name"])["secret"]["secretName"]
        == FULL.one("Secret")["metadata"]["name"]
    )


def collector_tokens(out: Rendered, tmp_path: Path) -> dict[str, Token]:
    """The rendered token file as the collector reads it (collector/http/tokens.py)."""
    path = tmp_path / "collector-tokens"
    path.write_text(out.secret_value("collector-tokens"))
    return {token.name: token for token in load_tokens(ServerSettings(tokens_file=path))}


def test_generated_tokens_are_one_per_scope_and_the_collector_reads_them(tmp_path: Path) -> None:
    tokens = collector_tokens(DEFAULT, tmp_path)
    for name, scopes in (("agents", {"agent"}), ("read", {"read"}), ("admin", {"read", "admin"}),
                         ("alertmanager", {"alertmanager"}), ("metrics", {"metrics"})):  # fmt: skip
        token = tokens[name]
        assert token.scopes == scopes and not token.unscoped, name
        assert len(token.secret) == 48
        key = "agent-token" if name == "agents" else f"{name}-token"
        assert DEFAULT.secret_value(key) == token.secret
    assert len({token.secret for token in tokens.values()}) == 5
    # one token for every agent of the DaemonSet: bound to any node unless agentNodes says
    assert tokens["agents"].binding().allows("any-node")


def test_the_agents_token_is_bound_to_agent_nodes_and_extra_lines_keep_their_scopes(
    tmp_path: Path,
) -> None:
    tokens = collector_tokens(FULL, tmp_path)
    agents, slurm = tokens["agents"].binding(), tokens["slurm-nodes"].binding()
    assert agents.allows("gpu-node-7") and not agents.allows("slurm-3")
    assert slurm.allows("slurm-3") and not slurm.allows("gpu-node-7")


def test_the_collector_monitor_sends_the_metrics_token_when_metrics_need_one() -> None:
    [endpoint] = FULL.one("PodMonitor", "-collector")["spec"]["podMetricsEndpoints"]
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": FULL.one("Secret")["metadata"]["name"], "key": "metrics-token"},
    }
    config = yaml.safe_load(FULL.configmap_file("-collector", "collector.yaml"))
    assert config["server"]["metrics_require_token"] is True
    out = render({"monitoring": {"collector": {"enabled": True, "kind": "ServiceMonitor"}}})
    [endpoint] = out.one("ServiceMonitor", "-collector")["spec"]["endpoints"]
    assert "authorization" not in endpoint  # off by default: Prometheus' usual scrape


def test_an_existing_secret_replaces_the_chart_s() -> None:
    out = render({"secret": {"existingSecret": "gpufleet-creds"}})
    assert "Secret" not in out.kinds()
    assert volume(collector(out), "secrets")["secret"]["secretName"] == "gpufleet-creds"
    assert volume(out.pod_spec("DaemonSet"), "secrets")["secret"]["secretName"] == "gpufleet-creds"


#: what collector/kube/settings.py says reading pod metadata needs: read-only
METADATA_RBAC = {
    "pods": {"get", "list", "watch"},
    "namespaces": {"get", "list", "watch"},
    "replicasets": {"get", "list", "watch"},
    "statefulsets": {"get", "list", "watch"},
    "daemonsets": {"get", "list", "watch"},
    "jobs": {"get", "list", "watch"},
    "resourceclaims": {"get", "list", "watch"},
    "resourceslices": {"get", "list", "watch"},
}


def test_reading_pod_metadata_gets_read_only_rbac_cluster_wide() -> None:
    out = render({"collector": {"config": {"kubernetes": {"enabled": True}}}})
    assert _rules(out, "ClusterRole") == METADATA_RBAC
    assert not out.all("Role")
    account = out.one("ServiceAccount")["metadata"]["name"]
    assert collector(out)["serviceAccountName"] == account
    assert collector(out)["automountServiceAccountToken"] is True
    assert out.one("ClusterRoleBinding")["subjects"][0]["name"] == account
    text = out.configmap_file("-collector", "collector.yaml")
    assert yaml.safe_load(text)["kubernetes"]["enabled"] is True


def test_reading_metadata_and_enforcing_share_one_service_account() -> None:
    values = actions(default={"mode": "enforce", "dry_run": False})
    values["collector"]["config"]["kubernetes"] = {"enabled": True}
    out = render(values)
    assert len(out.all("ServiceAccount")) == 1
    names = sorted(r["metadata"]["name"] for r in out.all("ClusterRole"))
    assert [n.rsplit("-", 1)[1] for n in names] == ["metadata", "release"]


def test_an_enforcing_team_policy_spans_namespaces_so_rbac_is_cluster_wide() -> None:
    out = render(actions(policies={"team:nlp": {"mode": "enforce", "dry_run": False}}))
    assert not out.all("Role")  # never a Role in a "namespace" named team:nlp
    assert _rules(out, "ClusterRole") == RELEASE_RBAC
