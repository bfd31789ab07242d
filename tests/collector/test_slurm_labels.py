"""A Slurm job's account and partition, from the agent's attribution to the collector.

The agent attributes a process from a fixture /proc entry (its Slurm environ), ships the
sample as it does (gzipped JSON), and the collector decodes it; then the collector's own
code groups the workload (``workload_ref``) and picks its auto-release policy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agent.attribution.attributor import Attributor
from agent.config import AttributionSettings
from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, ProcessSample, Workload
from agent.spool import gzip_batch
from collector.actions.engine import ActionEngine, Executors
from collector.actions.log import ActionLog
from collector.actions.settings import ActionSettings, PolicySettings
from collector.analysis.energy import workload_ref, workload_shares
from collector.ingest.decode import decode_batch
from collector.ledger.store import Ledger
from collector.records import (
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
)
from tests.paths import FIXTURES

GPU = "GPU-0a1b2c3d-0000-4000-8000-000000000000"
T0 = 1_790_000_000.0
HOUR = 3600.0
#: fixture PID 2001: a Slurm job of account "nlp" on partition "gpu"
SLURM_PID = 2001


def shipped_workload(tmp_path: Path, proc_root: Path, pid: int) -> Workload:
    """What the collector decodes for the one workload the agent attributed to ``pid``."""
    settings = AttributionSettings(
        kubelet_socket=tmp_path / "no-kubelet.sock",
        proc_root=proc_root,
        gpustat_dir=tmp_path / "no-gpustat",
    )
    attributor = Attributor(settings)
    try:
        sample = GpuSample(timestamp=T0, gpu_uuid=GPU, processes=(ProcessSample(pid=pid),))
        gpus = [GpuInfo(uuid=GPU, index=0, name="NVIDIA H100 80GB HBM3")]
        samples = attributor.annotate(gpus, [sample])
    finally:
        attributor.close()
    batch = Batch(
        schema_version=SCHEMA_VERSION,
        node="n1",
        agent_boot_id="boot",
        seq=1,
        sent_at=T0,
        gpus=tuple(gpus),
        samples=tuple(samples),
    )
    decoded = decode_batch(gzip_batch(batch), "gzip", 1 << 20)
    [workload] = decoded.samples[0].workloads
    return workload


def partition_only_proc(tmp_path: Path) -> Path:
    """Fixture PID 2001 without SLURM_JOB_ACCOUNT, on partition ``gpu-long``."""
    root = tmp_path / "proc"
    shutil.copytree(FIXTURES / "proc" / str(SLURM_PID), root / str(SLURM_PID))
    environ = root / str(SLURM_PID) / "environ"
    entries = [e for e in environ.read_bytes().split(b"\0") if e]
    kept = [
        e for e in entries if not e.startswith((b"SLURM_JOB_ACCOUNT=", b"SLURM_JOB_PARTITION="))
    ]
    environ.write_bytes(b"\0".join([*kept, b"SLURM_JOB_PARTITION=gpu-long"]) + b"\0")
    return root


def test_a_slurm_job_groups_under_its_account(tmp_path: Path) -> None:
    workload = shipped_workload(tmp_path, FIXTURES / "proc", SLURM_PID)
    ref = workload_ref(workload)
    assert (ref.key, ref.namespace, ref.user) == ("slurm:4242", "nlp", "alice")
    sample = GpuSample(timestamp=T0, gpu_uuid=GPU, workloads=(workload,))
    assert [r.namespace for r in workload_shares(sample)] == ["nlp"]


def test_a_partition_policy_applies_to_a_job_of_that_partition(tmp_path: Path) -> None:
    ref = workload_ref(shipped_workload(tmp_path, partition_only_proc(tmp_path), SLURM_PID))
    assert ref.namespace == "gpu-long"
    notify = PolicySettings(mode="notify", release_after_seconds=HOUR, min_runtime_seconds=0)
    settings = ActionSettings(policies={"gpu-long": notify})  # the default is off
    view = GpuView(
        uuid=GPU,
        node="n1",
        index=0,
        model="H100",
        name="NVIDIA H100",
        state=GpuState.ALLOCATED_IDLE,
        last_seen=T0 + 2 * HOUR,
        workloads=(ref,),
        idle_since=T0,
    )
    rec = Recommendation(
        id=f"release_idle:{ref.key}",
        kind=RecommendationKind.RELEASE_IDLE,
        subject=ref.key,
        title="Release",
        evidence={"idle_since": T0},
        status=RecommendationStatus.OPEN,
        savings=Savings(3000.0, 500.0, 200.0, "USD", 4.1),
        opened_at=T0,
        updated_at=T0,
        gpu_uuids=(GPU,),
        workload_key=ref.key,
        namespace=ref.namespace,
    )
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    try:
        engine = ActionEngine(settings, ActionLog(ledger), Executors())
        entries = engine.run([view], [rec], T0 + 2 * HOUR)
    finally:
        ledger.close()
    assert [(e.workload_key, e.decision) for e in entries] == [("slurm:4242", "warned")]
