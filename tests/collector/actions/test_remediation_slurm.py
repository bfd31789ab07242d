"""Remediation on a real Slurm 22.05 cluster (tests/slurm): a node with a hardware-XID GPU
really drains (``sinfo`` and ``scontrol show node`` say DRAIN, with gpufleet's reason), a
running job keeps running, and the undo command the message gives really resumes it."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.actions.executors import ExecutorError
from collector.actions.log import ActionLog
from collector.actions.node_executors import NodeExecutor, SlurmDrain
from collector.actions.remediation import Remediator
from collector.actions.settings import ActionSettings, RemediationSettings, SlurmSettings
from collector.ledger.store import Ledger
from collector.notify.messages import Event
from collector.records import GpuState, GpuView, WorkloadRef
from tests.collector.actions.test_remediation import NOW, recs
from tests.collector.recommend.work_windows import gpu
from tests.slurm.cluster import SlurmCluster

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(slurm_jobs: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmCluster]:
    monkeypatch.setenv("SLURM_CONF", slurm_jobs.env["SLURM_CONF"])
    try:
        yield slurm_jobs
    finally:  # the cluster is shared by the session: leave the node as it was
        if "DRAIN" in node_state(slurm_jobs)[0]:
            slurm_jobs.run("scontrol", "update", f"nodename={slurm_jobs.node}", "state=resume")


def node_state(cluster: SlurmCluster) -> tuple[str, str]:
    out = cluster.run("scontrol", "show", "node", "-o", cluster.node)
    fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
    reason = out.partition("Reason=")[2].split(" [")[0] if "Reason=" in out else ""
    return fields["State"], reason


def test_a_node_with_an_xid_gpu_drains_and_the_undo_resumes_it(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    job = cluster.sbatch("--gres=gpu:1", "-J", "on-the-broken-node")
    cluster.wait_running(job)
    ref = WorkloadRef(f"slurm:{job}", "slurm_job", job, "debug", "", "root")
    fleet = [
        GpuView(
            uuid=f"GPU-{i}",
            node=cluster.node,
            index=i,
            model="H100",
            name="NVIDIA H100",
            state=GpuState.ACTIVE,
            last_seen=NOW - 1.0,
            workloads=(ref,),
        )
        for i in range(4)
    ]
    found = recs(gpu(3, node=cluster.node, fault_xid_samples=3, fault_xids=(79,)))
    settings = ActionSettings(
        slurm=SlurmSettings(enabled=True), remediation=RemediationSettings(mode="enforce")
    )
    announced: list[Event] = []
    executors: dict[str, NodeExecutor] = {"slurm": SlurmDrain(settings.slurm)}
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    try:
        remedy = Remediator(
            settings, ActionLog(ledger), executors, lambda e, _: announced.append(e) or 1
        )
        (entry,) = remedy.run(fleet, found, NOW)
        assert entry.decision == "acted", entry.detail
        assert remedy.run(fleet, found, NOW + 60) == []  # never twice
    finally:
        ledger.close()
    state, reason = node_state(cluster)
    assert "DRAIN" in state  # MIXED+DRAIN: draining, its job still runs
    assert reason == "gpufleet: GPU 3 XID 79"
    sinfo = cluster.run("sinfo", "-h", "-n", cluster.node, "-o", "%t").split()
    assert sinfo and sinfo[0] in ("drng", "drain")
    assert cluster.job(job)["job_state"] == "RUNNING"  # type: ignore[index]
    # the message says how to undo it; that command, run as given, resumes the node
    (event,) = announced
    undo = event.facts.undo
    assert undo == f"scontrol update nodename={cluster.node} state=resume"
    subprocess.run(shlex.split(undo), env=cluster.env, check=True, capture_output=True)
    assert "DRAIN" not in node_state(cluster)[0]


def test_an_unknown_node_is_not_found_and_nothing_drains(cluster: SlurmCluster) -> None:
    drain = SlurmDrain(SlurmSettings(enabled=True))
    seen = drain.inspect("no-such-node", "gpufleet: test")
    assert not seen.exists and seen.detail == "Slurm node no-such-node not found"
    with pytest.raises(ExecutorError, match="no-such-node not found; nothing drained"):
        drain.take_out("no-such-node", "gpufleet: test")
    assert "DRAIN" not in node_state(cluster)[0]
