"""The ConfigMaps the chart renders are config files the programs accept, key for key.

Each settings key is one Helm value under agent.config / collector.config, except the few
the chart decides itself (listed below with where they come from).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pytest
import yaml

from agent.config import AgentSettings, AttributionSettings, ShipperSettings
from collector.actions.settings import ActionSettings, PolicySettings
from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from collector.notify.settings import ChannelSettings, NotificationSettings, RouteSettings
from gpufleet.settings import build, load_settings
from tests.helm.chart import CHART_DIR, Rendered, env, full_values, mounts, render

SCHEMA = json.loads((CHART_DIR / "values.schema.json").read_text())

#: settings keys the chart sets itself -> the value or mechanism that sets them
AGENT_OWNED = {
    "node.name": "NODE_NAME from the downward API",
    "shipper.url": "agent.collectorUrl (default: the collector Service)",
    "shipper.token": "never inline: the Secret",
    "shipper.token_file": "GPUFLEET_SHIPPER__TOKEN_FILE, the mounted Secret",
    "shipper.spool_dir": "agent.spool",
    "exporter.address": "all interfaces, for probes and Prometheus",
    "attribution.kubelet_socket": "agent.kubeletPodResourcesPath, mounted in place",
    "attribution.proc_root": "agent.hostPID",
    "attribution.cgroup_root": "the host's /sys/fs/cgroup, mounted read-only at /host/...",
}
COLLECTOR_OWNED = {
    "server.host": "all interfaces",
    "server.tokens": "never inline: the Secret",
    "server.tokens_file": "the mounted Secret's collector-tokens",
    "ledger.url": "collector.persistence, or collector.postgresql's Secret (GPUFLEET_LEDGER__URL)",
    "cluster.replica_id": "the pod name (GPUFLEET_CLUSTER__REPLICA_ID, downward API)",
    "cluster.enabled": "on with collector.postgresql (GPUFLEET_CLUSTER__ENABLED)",
    "answers.slack_signing_secret": "never inline: a mounted Secret, answers.*_file",
    "answers.feishu_verification_token": "never inline: a mounted Secret, answers.*_file",
    "answers.feishu_encrypt_key": "never inline: a mounted Secret, answers.*_file",
    "answers.link_secret": "never inline: a mounted Secret, answers.*_file",
    "influx.token": "never inline: the Secret",
    "influx.token_file": "the mounted Secret's influx-token",
    "kubernetes.host": "in-cluster: the collector's ServiceAccount",
    "kubernetes.kubeconfig": "in-cluster: the collector's ServiceAccount",
    "kubernetes.token_file": "in-cluster: the collector's ServiceAccount",
    "kubernetes.ca_file": "in-cluster: the collector's ServiceAccount",
}
#: actions.kubernetes: in-cluster ServiceAccount, enabled when a policy enforces;
#: actions.webhook: secret.actionWebhook / secret.actionWebhookKey as files
ACTIONS_OWNED = {
    "kubernetes": {"enabled", "host", "kubeconfig", "token_file", "ca_file"},
    "webhook": {"url", "url_file", "secret", "secret_file"},
}
#: per notification channel: secret.webhooks.<name> / secret.signingKeys.<name> as files
CHANNEL_OWNED = {"url", "url_file", "secret", "secret_file"}
#: the notifications section the chart renders, until collector/config.py wires it in
SECTIONS = {"notifications": NotificationSettings, **typing.get_type_hints(CollectorSettings)}


def load_agent(out: Rendered, tmp_path: Path) -> AgentSettings:
    """The agent's settings as the pod sees them: the ConfigMap file plus the pod's env."""
    path = tmp_path / "agent.yaml"
    path.write_text(out.configmap_file("-agent", "agent.yaml"))
    environ = {k: e["value"] for k, e in env(out.pod_spec("DaemonSet")).items() if "value" in e}
    return load_settings(AgentSettings, path, environ)


def load_collector(out: Rendered, tmp_path: Path) -> CollectorSettings:
    """The collector's settings from the rendered file, through the program's strict loader.

    While CollectorSettings has no ``notifications`` field yet, that section is built on
    its own with the same strict loader (and checked by load_notifications).
    """
    raw = yaml.safe_load(out.configmap_file("-collector", "collector.yaml"))
    if "notifications" not in typing.get_type_hints(CollectorSettings):
        raw.pop("notifications", None)
    path = tmp_path / "collector.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_settings(CollectorSettings, path, {})


def load_notifications(out: Rendered) -> NotificationSettings:
    raw = yaml.safe_load(out.configmap_file("-collector", "collector.yaml"))
    return build(NotificationSettings, raw.get("notifications", {}), "notifications")


def test_default_agent_config_is_the_program_s_defaults_plus_the_chart_s_keys(
    tmp_path: Path,
) -> None:
    settings = load_agent(render(), tmp_path)
    shipper = dataclasses.replace(
        ShipperSettings(),
        url="http://gf-gpufleet-collector.gpu.svc:8080",
        token_file=Path("/etc/gpufleet/secrets/agent-token"),
        spool_dir=Path("/var/lib/gpufleet/spool"),
    )
    attribution = dataclasses.replace(
        AttributionSettings(), cgroup_root=Path("/host/sys/fs/cgroup")
    )
    expected = dataclasses.replace(AgentSettings(), shipper=shipper, attribution=attribution)
    assert settings == expected, (
        "helm/gpufleet/values.yaml agent.config drifted from agent/config.py defaults"
    )


def test_default_collector_config_is_the_program_s_defaults_plus_the_chart_s_keys(
    tmp_path: Path,
) -> None:
    settings = load_collector(render(), tmp_path)
    expected = dataclasses.replace(
        CollectorSettings(),
        server=dataclasses.replace(
            ServerSettings(),
            host="0.0.0.0",
            tokens_file=Path("/etc/gpufleet/secrets/collector-tokens"),
        ),
        ledger=dataclasses.replace(LedgerSettings(), url="/var/lib/gpufleet/gpufleet.db"),
    )
    assert settings == expected, (
        "helm/gpufleet/values.yaml collector.config drifted from collector/config.py defaults"
    )


def test_full_values_reach_the_programs(tmp_path: Path) -> None:
    out = render(full_values())
    agent = load_agent(out, tmp_path)
    assert agent.node.labels["region"] == "eu-central"
    assert (agent.exporter.port, agent.exporter.dcgm_compat) == (9400, True)
    assert agent.shipper.spool_max_bytes == 1073741824
    assert agent.attribution.manual["GPU-00000000-0000-0000-0000-000000000001"]["team"] == "search"
    collector = load_collector(out, tmp_path)
    assert (collector.carbon.region, collector.carbon.pue) == ("DEU", 1.35)
    assert collector.analysis.idle_window_seconds == 3600.0
    assert collector.ledger.retention_days == 730
    assert collector.server.public_url == "https://gpufleet.example.com"
    assert (collector.influx.url, collector.influx.version) == (
        "http://influxdb.monitoring.svc:8086",
        2,
    )


def test_ledger_synchronous_reaches_the_collector(tmp_path: Path) -> None:
    assert load_collector(render(), tmp_path).ledger.synchronous == "FULL"
    out = render({"collector": {"config": {"ledger": {"synchronous": "NORMAL"}}}})
    ledger = load_collector(out, tmp_path).ledger
    assert (ledger.synchronous, ledger.url) == ("NORMAL", "/var/lib/gpufleet/gpufleet.db")
    assert ledger.retention_days == 400


def test_notification_channels_read_their_urls_and_keys_from_the_secret() -> None:
    out = render(full_values())
    notifications = load_notifications(out)
    assert [(c.name, c.kind) for c in notifications.channels] == [
        ("ml-feishu", "feishu"),
        ("ops-slack", "slack"),
    ]
    assert notifications.cooldown_seconds == 1800.0
    assert notifications.users["alice"].slack == "U0ALICE"
    assert notifications.teams["vision"].channels == ["ml-feishu"]
    assert notifications.routes[-1].to_owner_team and notifications.routes[-1].channels == []
    secret_dir = mounts(out.pod_spec("Deployment"))["/etc/gpufleet/secrets"]
    assert secret_dir["readOnly"] is True
    files = [c.url_file for c in notifications.channels]
    files += [c.secret_file for c in notifications.channels if c.secret_file]
    assert len(files) == 3
    for file in files:
        assert file is not None and str(file.parent) == "/etc/gpufleet/secrets"
        assert file.name in out.one("Secret")["data"]
    assert [c.url for c in notifications.channels] == ["", ""]


def test_the_rendered_price_book_is_the_one_the_config_names(tmp_path: Path) -> None:
    out = render(full_values())
    settings = load_collector(out, tmp_path)
    assert settings.pricing.price_book is not None
    spec = out.pod_spec("Deployment")
    mount = mounts(spec)[str(settings.pricing.price_book)]
    assert mount["subPath"] == "pricebook.yaml"
    book = tmp_path / "pricebook.yaml"
    book.write_text(out.configmap_file("-collector", mount["subPath"]))
    assert PriceBook.load(book).currency == "EUR"


def test_the_agent_ships_to_the_collector_service(tmp_path: Path) -> None:
    out = render()
    url = urlsplit(str(load_agent(out, tmp_path).shipper.url))
    service = out.one("Service", "-collector")
    assert url.hostname == f"{service['metadata']['name']}.gpu.svc"
    assert url.port == service["spec"]["ports"][0]["port"]


def test_secret_files_the_configs_name_are_mounted(tmp_path: Path) -> None:
    out = render()
    token_file = load_agent(out, tmp_path).shipper.token_file
    tokens_file = load_collector(out, tmp_path).server.tokens_file
    influx = load_collector(render(full_values()), tmp_path).influx.token_file
    assert influx == Path("/etc/gpufleet/secrets/influx-token")
    assert "influx-token" in render(full_values()).one("Secret")["data"]
    for path, kind in ((token_file, "DaemonSet"), (tokens_file, "Deployment")):
        assert path is not None
        assert str(path.parent) in mounts(out.pod_spec(kind))
        assert path.name in out.one("Secret")["data"]


def _leaf_hints(sections: dict[str, Any]) -> dict[str, Any]:
    """section.key -> type hint, for section name -> section dataclass."""
    leaves = {}
    for section, section_cls in sections.items():
        for key, hint in typing.get_type_hints(section_cls).items():
            leaves[f"{section}.{key}"] = hint
    return leaves


def _schema_leaves(component: str) -> dict[str, Any]:
    config = SCHEMA["properties"][component]["properties"]["config"]["properties"]
    return {f"{s}.{k}": v for s, sub in config.items() for k, v in sub["properties"].items()}


def _json_types(hint: Any) -> set[str]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return set().union(*(_json_types(a) for a in args if a is not type(None)))
    if origin is Literal:
        return {"string"}
    if origin in (list, tuple):
        return {"array"}
    if origin is dict:
        return {"object"}
    if dataclasses.is_dataclass(hint):
        return {"object"}
    names = {bool: "boolean", int: "integer", float: "number", str: "string", Path: "string"}
    return {names[hint]}


@pytest.mark.parametrize(
    ("component", "sections", "owned"),
    [
        ("agent", typing.get_type_hints(AgentSettings), AGENT_OWNED),
        ("collector", SECTIONS, COLLECTOR_OWNED),
    ],
)
def test_every_settings_key_is_one_helm_value(
    component: str, sections: dict[str, Any], owned: dict[str, str]
) -> None:
    settings = _leaf_hints(sections)
    schema = _schema_leaves(component)
    missing = sorted(set(settings) - set(schema) - set(owned))
    assert not missing, f"values.schema.json lacks {component}.config keys: {missing}"
    assert not sorted(set(schema) - set(settings)), "the schema has keys the program rejects"
    assert not sorted(set(schema) & set(owned)), "a chart-owned key is also a value"
    for key, prop in schema.items():
        want = _json_types(settings[key])
        got = {prop["type"]} if isinstance(prop["type"], str) else set(prop["type"])
        # a float setting accepts integers too (Helm writes 60.0 as 60)
        assert got <= want | ({"integer"} if "number" in want else set()), (key, got, want)


def test_channel_and_route_keys_are_helm_values() -> None:
    notifications = SCHEMA["properties"]["collector"]["properties"]["config"]["properties"][
        "notifications"
    ]["properties"]
    channel = set(notifications["channels"]["items"]["properties"])
    assert channel == {f.name for f in dataclasses.fields(ChannelSettings)} - CHANNEL_OWNED
    route = set(notifications["routes"]["items"]["properties"])
    assert route == {f.name for f in dataclasses.fields(RouteSettings)}


def test_a_channel_without_a_webhook_in_the_secret_fails_the_render() -> None:
    from helm_python.errors import HelmRenderError

    channels = [{"name": "ops", "kind": "slack"}]
    with pytest.raises(HelmRenderError, match=r"set secret.webhooks.ops"):
        render({"collector": {"config": {"notifications": {"channels": channels}}}})


def test_action_keys_are_helm_values() -> None:
    schema = SCHEMA["properties"]["collector"]["properties"]["config"]["properties"]["actions"]
    hints = typing.get_type_hints(ActionSettings)
    for section, owned in ACTIONS_OWNED.items():
        keys = set(schema["properties"][section]["properties"])
        assert keys == {f.name for f in dataclasses.fields(hints[section])} - owned, section
    policy = set(schema["properties"]["default"]["properties"])
    assert policy == {f.name for f in dataclasses.fields(PolicySettings)}


def test_full_auto_release_policy_reaches_the_collector(tmp_path: Path) -> None:
    out = render(full_values())
    actions = load_collector(out, tmp_path).actions
    assert actions.policy_for("ml-research").mode == "enforce"
    assert actions.policy_for("ml-research").release_after_seconds == 7200.0
    assert actions.policy_for("serving").mode == "off"  # "off" stays a string, not False
    assert actions.policy_for("elsewhere").mode == "notify"
    assert actions.kubernetes.enabled and actions.slurm.enabled
    assert actions.webhook.url_file == Path("/etc/gpufleet/secrets/action-webhook")
    assert actions.webhook.secret_file == Path("/etc/gpufleet/secrets/action-webhook-key")
    for key in ("action-webhook", "action-webhook-key"):
        assert key in out.one("Secret")["data"]
