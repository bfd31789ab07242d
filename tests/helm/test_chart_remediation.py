"""Remediation in the chart: a cordon needs nodes get/patch cluster-wide, granted only when
``actions.remediation.mode`` is enforce (and not via Slurm); the settings reach the program."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.helm.chart import render
from tests.helm.test_chart_collector import RBAC_KINDS, _rules, collector
from tests.helm.test_chart_config import load_collector


def remediation(**section: Any) -> dict[str, Any]:
    return {"collector": {"config": {"actions": {"remediation": section}}}}


def test_off_and_dry_run_need_no_rbac() -> None:
    for values in ({}, remediation(mode="dry_run")):
        out = render(values)
        assert not RBAC_KINDS & set(out.kinds()), values
        assert collector(out)["automountServiceAccountToken"] is False
        assert "may cordon" not in out.notes


def test_enforce_grants_nodes_get_and_patch_and_nothing_else(tmp_path: Path) -> None:
    out = render(remediation(mode="enforce"))
    assert _rules(out, "ClusterRole") == {"nodes": {"get", "patch"}}
    assert not out.all("Role")
    account = out.one("ServiceAccount")["metadata"]["name"]
    assert collector(out)["serviceAccountName"] == account
    assert out.one("ClusterRoleBinding")["subjects"][0]["name"] == account
    assert "Remediation of nodes with broken GPUs: enforce (the collector may cordon" in out.notes
    actions = load_collector(out, tmp_path).actions
    assert actions.remediation.mode == "enforce" and actions.kubernetes.enabled
    assert actions.policy_for("anything").mode == "off"  # auto-release stays off


def test_drain_via_slurm_needs_no_kubernetes_rights(tmp_path: Path) -> None:
    values = remediation(mode="enforce", via="slurm", conditions=["xid", "missing"])
    values["collector"]["config"]["actions"]["slurm"] = {"enabled": True}
    out = render(values)
    assert not RBAC_KINDS & set(out.kinds())
    text = out.configmap_file("-collector", "collector.yaml")
    assert yaml.safe_load(text)["actions"]["kubernetes"]["enabled"] is False
    actions = load_collector(out, tmp_path).actions
    assert (actions.remediation.via, actions.remediation.conditions) == (
        "slurm",
        ["xid", "missing"],
    )


def test_expected_gpus_per_node_reaches_the_collector(tmp_path: Path) -> None:
    out = render({"collector": {"config": {"analysis": {"expected_gpus_per_node": 8}}}})
    assert load_collector(out, tmp_path).analysis.expected_gpus_per_node == 8
