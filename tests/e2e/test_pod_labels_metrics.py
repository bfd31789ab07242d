"""kubernetes.pod_labels through the collector ``gpufleet collector`` builds: a batch
POSTed over loopback HTTP with a pod whose agent-sent labels hold ``app`` and
``cost-center`` (no API server), and /metrics' gpufleet_workload_info carries exactly the
allowlisted ones as label_app and label_cost_center."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import msgspec
from prometheus_client.parser import text_string_to_metric_families

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from collector.kube.settings import KubeMetadataSettings
from gpufleet.cli.collector import build_collector, serve
from tests.e2e.fleet_rig import TOKEN, free_port

GPU = GpuInfo(uuid="GPU-9a8b7c6d-0000-4000-8000-00000000000a", index=0,
              name="NVIDIA H100 80GB HBM3")  # fmt: skip
LABELS = {"app": "llm-serve", "cost-center": "cc-4411", "pod-template-hash": "6d8f9c7b5",
          "team": "llm-platform", "k8s_deployment_name": "llm-serve"}  # fmt: skip


def batch(seq: int, at: float) -> bytes:
    pod = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid-1", name="llm-serve-x2v7q",
                   namespace="ml", labels=LABELS)  # fmt: skip
    sample = GpuSample(timestamp=at, gpu_uuid=GPU.uuid, sm_activity=0.0, dram_activity=0.0,
                       power_watts=70.0, energy_joules=70.0 * seq, workloads=(pod,))  # fmt: skip
    return msgspec.json.encode(Batch(schema_version=SCHEMA_VERSION, node="gpu-node-01",
                                     agent_boot_id="b", seq=seq, sent_at=at, gpus=(GPU,),
                                     samples=(sample,)))  # fmt: skip


def test_the_allowlisted_pod_labels_reach_metrics(tmp_path: Path) -> None:
    port = free_port()
    settings = CollectorSettings(
        server=ServerSettings(port=port, tokens=[TOKEN]),
        ledger=LedgerSettings(url=str(tmp_path / "ledger.db")),
        kubernetes=KubeMetadataSettings(pod_labels=["app", "cost-center", "missing"]),
    )
    now = time.time()
    collector = build_collector(settings, lambda: now, tokens=frozenset([TOKEN]))
    server = serve(collector)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            for seq in range(1, 4):
                answer = http.post("/v1/batches", content=batch(seq, now - 30 + 10 * seq),
                                   headers={"Authorization": f"Bearer {TOKEN}",
                                            "Content-Type": "application/json"})  # fmt: skip
                assert answer.status_code == 200, answer.text
            collector.core.applier.tick(flush=True)
            text = http.get("/metrics").text
    finally:
        server.should_exit = True
        collector.stop()
    (info,) = [
        {k: v for k, v in s.labels.items() if v}
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "gpufleet_workload_info"
    ]
    assert info == {
        "k8s_namespace_name": "ml", "workload": "pod:ml/llm-serve-x2v7q", "team": "llm-platform",
        "owner_kind": "Deployment", "owner_name": "llm-serve", "label_app": "llm-serve",
        "label_cost_center": "cc-4411",
    }  # fmt: skip
