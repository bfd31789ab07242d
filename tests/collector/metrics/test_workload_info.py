"""gpufleet_workload_info: one series per workload naming its owner and team, with only
the attributes kubernetes.metric_labels allows (the rest empty, which Prometheus drops)."""

from __future__ import annotations

import pytest

from collector.backend import EnergyTotal, FleetTotals
from collector.kube.settings import KubeMetadataSettings
from collector.metrics import catalogue as cat
from collector.metrics.fleet_families import workload_families
from gpufleet.settings import ConfigError

NOW = 1_767_225_600.0
SERVE = EnergyTotal("ml", "pod:ml/llm-serve-6d8f9c7b5-x2v7q", "llm-platform", 3.6e6, 400.0,
                    last_seen=NOW - 60, owner="Deployment/ml/llm-serve",
                    user="ml-oncall")  # fmt: skip
JOB = EnergyTotal("physics", "slurm:991", "lattice", 1e6, 100.0, last_seen=NOW - 60,
                  owner="User/alice", user="alice")  # fmt: skip
GONE = EnergyTotal("ml", "pod:ml/old", "x", 1.0, 1.0, last_seen=NOW - 30 * 86400, owner="Job/ml/o")
UNALLOCATED = EnergyTotal("", "", "", 5e6, 500.0)


def info(allowed: list[str]) -> dict[tuple[str, ...], float]:
    totals = FleetTotals("USD", energy=(SERVE, JOB, GONE, UNALLOCATED))
    (family,) = [f for f in workload_families(totals, NOW, allowed) if f.spec is cat.WORKLOAD_INFO]
    return dict(family.values)


def test_the_default_names_team_and_owner_and_leaves_the_user_out() -> None:
    labels = dict.fromkeys(KubeMetadataSettings().metric_labels)
    assert info(list(labels)) == {
        ("ml", SERVE.workload, "llm-platform", "", "Deployment", "llm-serve", "", ""): 1.0,
        ("physics", "slurm:991", "lattice", "", "User", "alice", "", ""): 1.0,
    }  # the unallocated row and a workload past the series TTL have none
    assert cat.WORKLOAD_INFO.labels == (
        "k8s_namespace_name", "workload", "team", "user", "owner_kind", "owner_name", "queue",
        "priority_class",
    )  # fmt: skip


def test_an_allowlist_of_one_keeps_only_that() -> None:
    assert set(info(["user"])) == {
        ("ml", SERVE.workload, "", "ml-oncall", "", "", "", ""),
        ("physics", "slurm:991", "", "alice", "", "", "", ""),
    }


def test_only_known_attributes_may_be_allowed() -> None:
    with pytest.raises(ConfigError, match=r"kubernetes.metric_labels: each must be one of .*"
                       r"got \['app'\]"):  # fmt: skip
        KubeMetadataSettings(metric_labels=["team", "app"])
