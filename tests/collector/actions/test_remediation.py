"""Remediation of broken GPUs: a node with a BROKEN_GPUS recommendation (made by the real
rule, collector/recommend/broken_gpus.py) is cordoned through the official Kubernetes
client against a local API server, once per condition, never on stale data, off unless
enabled; every step in the action log and announced (en/zh) with how to undo it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest

from collector.actions.kubernetes import api_client
from collector.actions.log import ActionLog
from collector.actions.node_executors import REASON_ANNOTATION, KubernetesCordon, NodeExecutor
from collector.actions.remediation import Remediator, planned
from collector.actions.remedies import executor_kind, faults_of, remedies
from collector.actions.settings import ActionSettings, KubernetesSettings, RemediationSettings
from collector.analysis.carbon import CarbonContext
from collector.analysis.cost import PriceBook
from collector.config import AnalysisSettings, CollectorSettings
from collector.ledger.store import Ledger
from collector.notify.links import Links
from collector.notify.messages import Event, as_markdown, render
from collector.recommend.broken_gpus import broken_gpus
from collector.recommend.rules import RecommendPolicy, RuleContext
from collector.records import GpuState, GpuView, Recommendation, WorkloadRef
from gpufleet.cli.alerting import build_alerting
from gpufleet.settings import ConfigError
from tests.collector.actions.fake_kubernetes import TOKEN, FakeKubernetes
from tests.collector.recommend.work_windows import JOB, gpu, window

NOW = 1_800_000_000.0


def views(node: str = "n1", ages: tuple[float, ...] = (1.0,) * 4) -> list[GpuView]:
    """The node's GPUs as the fleet sees them (uuids as work_windows.gpu names them)."""
    return [
        GpuView(
            uuid=f"GPU-{i}",
            node=node,
            index=i,
            model="H100",
            name="NVIDIA H100",
            state=GpuState.ACTIVE if age < 60 else GpuState.UNKNOWN,
            last_seen=NOW - age,
            workloads=(JOB,),
        )
        for i, age in enumerate(ages)
    ]


def recs(*gpus: object, fleet: list[GpuView] | None = None) -> list[Recommendation]:
    ctx = RuleContext(
        PriceBook.example(),
        CarbonContext(pue=1.2, intensity_g_per_kwh=400.0),
        AnalysisSettings(),
        RecommendPolicy.default(),
        NOW,
    )
    return broken_gpus(fleet or [], [window(list(gpus))], ctx, {})  # type: ignore[arg-type]


XID = gpu(3, fault_xid_samples=3, fault_xids=(48, 63))
HOT = gpu(2, throttled_share=0.8, clock_ratio=0.6)


@dataclasses.dataclass
class Rig:
    remedy: Remediator
    cluster: FakeKubernetes
    announced: list[Event]
    log: ActionLog

    def run(self, fleet: list[GpuView], found: list[Recommendation], now: float = NOW) -> list[str]:
        return [
            f"{e.stage.partition(':')[0]}={e.decision}" for e in self.remedy.run(fleet, found, now)
        ]


@contextmanager
def make_rig(tmp_path: Path, mode: str) -> Iterator[Rig]:
    cluster = FakeKubernetes([], nodes=("n1", "n2"))
    token = tmp_path / "token"
    token.write_text(TOKEN)
    k8s = KubernetesSettings(enabled=True, host=cluster.host, token_file=token)
    settings = ActionSettings(kubernetes=k8s, remediation=RemediationSettings(mode=mode))  # type: ignore[arg-type]
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    announced: list[Event] = []
    executors: dict[str, NodeExecutor] = {"kubernetes": KubernetesCordon(api_client(k8s))}
    remedy = Remediator(
        settings, ActionLog(ledger), executors, lambda e, now: announced.append(e) or 1
    )
    try:
        yield Rig(remedy, cluster, announced, ActionLog(ledger))
    finally:
        ledger.close()
        cluster.close()


@pytest.fixture
def enforcing(tmp_path: Path) -> Iterator[Rig]:
    with make_rig(tmp_path, "enforce") as rig:
        yield rig


def test_off_by_default_does_nothing(tmp_path: Path) -> None:
    assert RemediationSettings().mode == "off"
    with make_rig(tmp_path, "off") as rig:
        assert rig.run(views(), recs(XID)) == []
        assert rig.cluster.calls == [] and rig.log.entries() == [] and rig.announced == []


def test_dry_run_says_what_it_would_do_and_touches_nothing(tmp_path: Path) -> None:
    with make_rig(tmp_path, "dry_run") as rig:
        assert rig.run(views(), recs(XID)) == ["remedy-dry=dry_run"]
        assert rig.run(views(), recs(XID), NOW + 60) == []  # once per condition
        assert rig.cluster.calls == []
        (entry,) = rig.log.entries()
        assert (entry.workload_key, entry.detail, entry.dry_run) == (
            "node:n1",
            "kubectl cordon n1",
            True,
        )
        (event,) = rig.announced
        text = as_markdown(render([event], "en", Links()))
        assert "Dry run: would take node n1 out of service" in text
        assert "To do it by hand: `kubectl cordon n1`" in text
        assert "gpufleet: GPU 3 XID 48, 63" in text


def test_enforce_cordons_once_and_says_how_to_undo(enforcing: Rig) -> None:
    found = recs(XID)
    assert enforcing.run(views(), found) == ["remedy=acted"]
    node = enforcing.cluster.nodes["n1"]
    assert node["unschedulable"] is True
    assert node["annotations"][REASON_ANNOTATION] == "gpufleet: GPU 3 XID 48, 63"
    assert enforcing.cluster.nodes["n2"]["unschedulable"] is False
    patches = [c for c in enforcing.cluster.mutations() if c.method == "PATCH"]
    assert [c.path for c in patches] == ["/api/v1/nodes/n1"]
    # the operator uncordons it; the same condition never cordons it again
    node["unschedulable"] = False
    assert enforcing.run(views(), found, NOW + 600) == []
    assert len([c for c in enforcing.cluster.mutations() if c.method == "PATCH"]) == 1
    (entry,) = enforcing.log.entries()
    assert (entry.stage.startswith("remedy:"), entry.decision, entry.detail) == (
        True,
        "acted",
        "kubectl cordon n1",
    )
    (event,) = enforcing.announced
    en = as_markdown(render([event], "en", Links()))
    zh = as_markdown(render([event], "zh", Links()))
    assert "Took node n1 out of service: kubectl cordon n1" in en
    assert "To undo it: `kubectl uncordon n1`" in en
    assert "已将节点 n1 停止调度" in zh and "撤销方法: `kubectl uncordon n1`" in zh


def test_throttling_alone_never_takes_a_node_out(enforcing: Rig) -> None:
    found = recs(HOT)
    assert found and found[0].evidence["broken_by_condition"].keys() == {"throttled"}  # type: ignore[union-attr]
    assert enforcing.run(views(), found) == []
    assert enforcing.cluster.calls == []


def test_stale_data_is_recorded_and_never_acted_on(enforcing: Rig) -> None:
    found = recs(XID)
    stale = views(ages=(1.0, 1.0, 1.0, 600.0))  # the faulted GPU itself says nothing fresh
    assert enforcing.run(stale, found) == ["remedy-stale=skipped"]
    assert enforcing.run(views(ages=(600.0,) * 4), found) == []  # recorded once
    assert enforcing.cluster.calls == []
    assert enforcing.announced[0].facts.reason == "stale"
    assert enforcing.run(views(), found, NOW + 60) == ["remedy=acted"]  # fresh again: acts


def test_a_missing_gpu_is_a_condition_and_a_silent_node_is_not(enforcing: Rig) -> None:
    fleet = views(ages=(1.0, 1.0, 1.0, 600.0))
    found = recs(fleet=fleet)  # GPU 3 silent while its peers report: missing
    (fault,) = faults_of(found[0], {v.uuid: v.index for v in fleet}, ["missing"])
    assert (fault.uuid, fault.index, fault.condition) == ("GPU-3", 3, "missing")
    assert enforcing.run(views(ages=(600.0,) * 4), found) == ["remedy-stale=skipped"]
    assert enforcing.run(fleet, found, NOW + 1) == ["remedy=acted"]
    reason = enforcing.cluster.nodes["n1"]["annotations"][REASON_ANNOTATION]
    assert reason == "gpufleet: GPU 3 missing from NVML"


def test_a_new_fault_on_a_cordoned_node_is_recorded_as_already_out(enforcing: Rig) -> None:
    assert enforcing.run(views(), recs(XID)) == ["remedy=acted"]
    worse = recs(XID, gpu(1, remap_pending_samples=5))
    assert enforcing.run(views(), worse, NOW + 60) == ["remedy=skipped"]
    assert enforcing.announced[-1].facts.reason == "already_out"
    assert "already cordoned" in enforcing.log.entries()[-1].detail


def test_enforce_without_an_executor_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"actions.remediation.mode: enforce needs an executor"):
        ActionSettings(remediation=RemediationSettings(mode="enforce"))
    with pytest.raises(ConfigError, match=r"actions.remediation.mode: 'on' is not off"):
        RemediationSettings(mode="on")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"actions.remediation.conditions: \['throttled'\]"):
        RemediationSettings(conditions=["throttled"])


def test_the_collector_runs_it_even_without_a_chat_channel(tmp_path: Path) -> None:

    actions = ActionSettings(remediation=RemediationSettings(mode="dry_run"))
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    try:
        alerting = build_alerting(CollectorSettings(actions=actions), ledger, lambda: NOW, [])
        assert alerting is not None and alerting.engine is None  # auto-release stays off
        alerting.step(views(), recs(XID), NOW)
        assert [e.decision for e in ActionLog(ledger).entries()] == ["dry_run"]
    finally:
        ledger.close()


def test_a_node_no_executor_fits_says_which_setting_decides() -> None:

    slurm = WorkloadRef("slurm:42", "slurm_job", "42", "debug")
    mixed = [msgspec.structs.replace(v, workloads=(JOB, slurm)) for v in views()]
    assert executor_kind("n1", mixed, "auto", []) == ""
    assert executor_kind("n1", mixed, "auto", ["slurm"]) == "slurm"
    assert executor_kind("n1", views(), "auto", ["kubernetes", "slurm"]) == "kubernetes"
    assert executor_kind("n1", views(), "slurm", []) == "slurm"
    (remedy,) = remedies(mixed, recs(XID), ["xid"])
    assert planned(remedy, "").action == "take node n1 out of service (set actions.remediation.via)"


def test_an_api_that_refuses_is_announced_once_and_tried_again(enforcing: Rig) -> None:
    enforcing.cluster.forbid.add("GET")
    assert enforcing.run(views(), recs(XID)) == ["remedy-error=failed"]
    assert enforcing.run(views(), recs(XID), NOW + 30) == []  # recorded once, no new message
    assert len(enforcing.announced) == 1 and "HTTP 403" in enforcing.announced[0].facts.detail
    enforcing.cluster.forbid.clear()
    assert enforcing.run(views(), recs(XID), NOW + 60) == ["remedy=acted"]
    assert enforcing.cluster.nodes["n1"]["unschedulable"] is True


def test_the_reason_names_each_gpu_its_xids_and_its_condition() -> None:
    lost = gpu(0, samples=360, unhealthy_samples=360, sm_mean=None, used_share=0.0,
               fault_xid_samples=1, fault_xids=(79,))  # fmt: skip
    quiet = gpu(1, fault_xid_samples=2)  # an XID whose code the window did not keep
    remap = gpu(2, remap_pending_samples=5)
    fleet = views()
    (remedy,) = remedies(fleet, recs(lost, quiet, remap, fleet=fleet), ["off_bus", "xid", "ecc"])
    assert remedy.reason == (
        "gpufleet: GPU 0 XID 79 (fell off the bus); GPU 1 hardware XID; "
        "GPU 2 uncorrectable ECC / row remap pending"
    )
