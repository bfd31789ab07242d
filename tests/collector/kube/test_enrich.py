"""Pod workloads attributed at ingest: from the API server's metadata where the collector
reads it, else from the labels the agent sent, and what the agent set itself wins; then
through the collector's core into the ledger's groupings (team, owner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from collector.accounting.rates import Rates
from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.analysis.energy import workload_ref
from collector.config import CarbonSettings, CollectorSettings
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.kube.settings import KubeMetadataSettings
from collector.ledger.store import Ledger
from collector.service import CollectorCore
from collector.usage_report import group_report, ledger_period
from tests.collector.kube.rig import reader_settings, running, wait_for
from tests.collector.kube.test_watcher import ALL
from tests.fakes.kube_api import FakeKubeApi, recorded_cluster

KEYS = keys_of(KubeMetadataSettings())
T0 = 1_767_225_600.0  # an hour boundary
INFO = GpuInfo(uuid="GPU-k", index=0, name="NVIDIA H100 80GB HBM3")


def pod(name: str, namespace: str = "ml", **fields: object) -> Workload:
    return Workload(kind=WorkloadKind.KUBERNETES_POD, id=f"uid-{name}", name=name,
                    namespace=namespace, **fields)  # type: ignore[arg-type]  # fmt: skip


def one_sample_batch(w: Workload, seq: int = 1, t: float = 0.0) -> Batch:
    sample = GpuSample(timestamp=T0 + t, gpu_uuid=INFO.uuid, sm_activity=0.0, dram_activity=0.0,
                       power_watts=70.0, energy_joules=70.0 * t, workloads=(w,))  # fmt: skip
    return Batch(schema_version=SCHEMA_VERSION, node="gpu-node-03", agent_boot_id="b", seq=seq,
                 sent_at=T0 + t, gpus=(INFO,), samples=(sample,))  # fmt: skip


def enriched(enricher: WorkloadEnricher, w: Workload) -> Workload:
    return enricher(one_sample_batch(w)).samples[0].workloads[0]


def test_without_api_access_the_labels_the_agent_sent_name_team_user_and_owner() -> None:
    labels = {"k8s_replicaset_name": "diffusion-serve-5c9d", "k8s_deployment_name":
              "diffusion-serve", "app.kubernetes.io/part-of": "vision", "user": "dana"}  # fmt: skip
    w = enriched(WorkloadEnricher(KEYS), pod("diffusion-serve-5c9d-abcde", labels=labels))
    ref = workload_ref(w)
    assert (ref.team, ref.user, ref.owner) == ("vision", "dana", "Deployment/ml/diffusion-serve")


def test_a_custom_owner_tops_the_chain() -> None:
    labels = {"k8s_owner_kind": "Notebook", "k8s_owner_name": "gpu-notebook",
              "k8s_statefulset_name": "gpu-notebook", "team": "research"}  # fmt: skip
    w = enriched(WorkloadEnricher(KEYS), pod("gpu-notebook-0", "kubeflow-alice", labels=labels))
    assert workload_ref(w).owner == "Notebook/kubeflow-alice/gpu-notebook"


def test_nothing_to_add_leaves_the_batch_as_it_came() -> None:
    batch = one_sample_batch(pod("bare"))
    assert WorkloadEnricher(KEYS)(batch) is batch
    slurm = Workload(kind=WorkloadKind.SLURM_JOB, id="7", slurm_job_id="7", labels={"team": "x"})
    batch = one_sample_batch(slurm)
    assert WorkloadEnricher(KEYS)(batch) is batch


@pytest.fixture
def fake() -> Iterator[FakeKubeApi]:
    server = FakeKubeApi(recorded_cluster())
    yield server
    server.close()


def test_api_metadata_wins_over_labels_and_the_agents_own_team_wins_over_both(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        wait_for(lambda: watcher.store.counts() == ALL)
        enricher = WorkloadEnricher(KEYS, watcher.store)
        sent = pod("llm-serve-6d8f9c7b5-x2v7q", labels={"team": "from-the-agent-labels"})
        ref = workload_ref(enriched(enricher, sent))
        assert (ref.team, ref.user, ref.owner) == (
            "llm-platform", "ml-oncall", "Deployment/ml/llm-serve"
        )  # fmt: skip
        manual = pod("llm-serve-6d8f9c7b5-x2v7q", team="set-by-hand", user="ops")
        ref = workload_ref(enriched(enricher, manual))
        assert (ref.team, ref.user, ref.owner) == ("set-by-hand", "ops", "Deployment/ml/llm-serve")
        # a pod the API server does not know (yet): its labels, and its namespace's team
        unknown = workload_ref(enriched(enricher, pod("new-pod-0")))
        assert (unknown.team, unknown.owner) == ("llm-platform", "")


def test_the_ledger_keeps_a_pods_queue_and_priority_class(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        wait_for(lambda: watcher.store.counts() == ALL)
        rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
        core = CollectorCore.build(
            CollectorSettings(), Ledger.open(str(tmp_path / "l.db")), rates, lambda: T0 + 60,
            WorkloadEnricher(KEYS, watcher.store),
        )  # fmt: skip
        try:
            bert = pod("bert-finetune-worker-0")
            for seq, t in enumerate(range(0, 60, 10), start=1):
                body = msgspec.json.encode(one_sample_batch(bert, seq, float(t)))
                core.service.submit(body, None, T0 + t).result(10)
            core.applier.tick(flush=True)
            by_queue = group_report(core.ledger, "queue", ledger_period(T0, T0 + 3600, T0 + 60))
            (ref,) = [r for r, _ in core.ledger.usage_totals_by_workload()]
        finally:
            core.close()
            core.ledger.close()
    assert [name for name, _ in by_queue.rows] == ["team-nlp-gpu"]
    assert (ref.queue, ref.priority_class, ref.owner) == (
        "team-nlp-gpu", "batch-low", "PyTorchJob/ml/bert-finetune"
    )  # fmt: skip


def test_the_ledger_groups_a_pods_usage_by_its_owner_and_team(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        wait_for(lambda: watcher.store.counts() == ALL)
        rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
        now = T0 + 600
        core = CollectorCore.build(
            CollectorSettings(), Ledger.open(str(tmp_path / "l.db")), rates, lambda: now,
            WorkloadEnricher(KEYS, watcher.store),
        )  # fmt: skip
        try:
            serve = pod("llm-serve-6d8f9c7b5-x2v7q")
            for seq, t in enumerate(range(0, 600, 10), start=1):
                body = msgspec.json.encode(one_sample_batch(serve, seq, float(t)))
                core.service.submit(body, None, T0 + t).result(10)
            core.applier.tick(flush=True)
            period = ledger_period(T0, T0 + 3600, now)
            by_owner = group_report(core.ledger, "owner", period)
            by_team = group_report(core.ledger, "team", period)
        finally:
            core.close()
            core.ledger.close()
    assert [name for name, _ in by_owner.rows] == ["Deployment/ml/llm-serve"]
    assert [name for name, _ in by_team.rows] == ["llm-platform"]
    ((_, usage),) = by_owner.rows
    assert usage.idle_seconds == pytest.approx(590.0)  # 60 idle samples, 10 s apart
