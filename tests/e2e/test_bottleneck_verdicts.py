"""Bottleneck verdicts on a simulated fleet with every pathology, held to ground truth.

Real agents (Sampler + Shipper, host readings in ``Batch.hosts``) post to a real collector
over loopback HTTP; the recommender's bottleneck recommendations, read back through
``/v1/recommendations``, are compared with each job's true cause
(agent/sources/simulated/truth.py): per cause, precision and recall of at least 0.9, no
verdict on healthy training jobs, and money that never passes each workload's unused share
and, with what no verdict explains, adds up to it, itself checked against the simulator's
true activity and clocks; a straggler's money is its job's lost time against truth.
Remediation, run on the collector's view after the run, cordons exactly the nodes with
faulted GPUs; each XID-faulted GPU names the XID codes the simulator made it log.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.sources.simulated.pathology import falls_off_bus, gpu_signals
from agent.sources.simulated.source import SimJob, SimulatedFleet, build_pathology_fleet
from agent.sources.simulated.truth import TRUE_CAUSES, true_cause
from agent.sources.simulated.workloads import ActivityKind
from collector.actions.kubernetes import api_client
from collector.actions.log import ActionLog
from collector.actions.node_executors import KubernetesCordon, NodeExecutor
from collector.actions.remediation import Remediator
from collector.actions.settings import ActionSettings, KubernetesSettings, RemediationSettings
from collector.analysis.verdicts import HARDWARE_XIDS
from collector.ledger.store import Ledger
from tests.collector.actions.fake_kubernetes import TOKEN as K8S_TOKEN
from tests.collector.actions.fake_kubernetes import FakeKubernetes
from tests.e2e.fleet_rig import TOKEN, FleetRig
from tests.e2e.truth import gpus_of

pytestmark = pytest.mark.slow

STEP_SECONDS = 5.0
SHIP_EVERY_TICKS = 12  # one POST per node per simulated minute
RUN_SECONDS = 40 * 60.0
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetRig]:
    fleet = build_pathology_fleet()
    workdir = tmp_path_factory.mktemp("verdicts")
    with FleetRig(fleet, workdir, STEP_SECONDS, SHIP_EVERY_TICKS) as running:
        running.run_until(running.start + RUN_SECONDS)
        running.finish()
        yield running


@pytest.fixture(scope="module")
def verdicts(rig: FleetRig) -> dict[str, dict[str, object]]:
    """The evidence of each open bottleneck recommendation, by workload key, from the API."""
    with httpx.Client(base_url=rig.url, timeout=10, headers=AUTH) as client:
        answer = client.get("/v1/recommendations", params={"kind": "bottleneck"})
    answer.raise_for_status()
    body = answer.json()
    items = body["recommendations"] if isinstance(body, dict) else body
    return {r["workload_key"]: r for r in items if r["kind"] == "bottleneck"}


def causes_of(rec: dict[str, object] | None) -> set[str]:
    if rec is None:
        return set()
    evidence = rec["evidence"]
    assert isinstance(evidence, dict)
    return set(evidence["causes"])


def test_each_cause_has_precision_and_recall_of_at_least_0_9(
    rig: FleetRig, verdicts: dict[str, dict[str, object]]
) -> None:
    jobs = rig.fleet.jobs
    scores = {}
    for cause in sorted(set(TRUE_CAUSES.values())):
        truth = {j.workload.key for j in jobs if true_cause(j) == cause}
        found = {j.workload.key for j in jobs if cause in causes_of(verdicts.get(j.workload.key))}
        assert len(truth) >= 2, f"the fleet needs at least two {cause} jobs"
        hits = len(truth & found)
        scores[cause] = (hits / len(found) if found else 0.0, hits / len(truth))
    table = {j.workload.key: (true_cause(j), causes_of(verdicts.get(j.workload.key))) for j in jobs}
    assert all(p >= 0.9 and r >= 0.9 for p, r in scores.values()), (scores, table)


def test_no_verdict_on_healthy_training_jobs(
    rig: FleetRig, verdicts: dict[str, dict[str, object]]
) -> None:
    healthy = rig.fleet.jobs_of_kind(ActivityKind.TRAINING)
    assert len(healthy) >= 4
    assert {j.workload.key for j in healthy} & set(verdicts) == set()


def true_used_share(fleet: SimulatedFleet, job: SimJob, t0: float, t1: float) -> float:
    """Mean over the job's GPUs and the samples in [t0, t1] of true SM activity x the true
    clock ratio; a GPU off the bus counts as unused."""
    shares = []
    for uuid in gpus_of(fleet, job):
        gpu = fleet.gpu(uuid)
        total, n = 0.0, 0
        t = t0
        while t <= t1:
            segment = gpu.segment_at(t)
            if not falls_off_bus(job):
                sm, _ = gpu.activity(segment)
                clock = gpu_signals(job, gpu.model, gpu.key, segment, sm, gpu.lags(job))
                total += sm * clock.clock_ratio
            n += 1
            t += STEP_SECONDS
        shares.append(total / n)
    return sum(shares) / len(shares)


def test_money_adds_up_to_the_unused_share_against_truth(
    rig: FleetRig, verdicts: dict[str, dict[str, object]]
) -> None:
    by_key = {j.workload.key: j for j in rig.fleet.jobs}
    assert verdicts
    for key, rec in verdicts.items():
        evidence = rec["evidence"]
        assert isinstance(evidence, dict)
        money = sum(v["money_per_hour"] for v in evidence["verdicts"])
        unused = evidence["unused_per_hour"]
        assert money <= unused + 1e-9, key
        rest = evidence["unattributed_per_hour"]
        assert money + rest == pytest.approx(unused, rel=1e-9, abs=1e-9), key
        assert rec["savings"]["money_per_hour"] == pytest.approx(money)
        window = evidence["window_seconds"]
        end = (math.floor(rig.now / 60.0) + 1) * 60.0
        truth = true_used_share(rig.fleet, by_key[key], max(rig.start, end - window), rig.now)
        price = evidence["price_per_hour"]
        assert price > 0
        assert unused == pytest.approx(price * (1.0 - truth), abs=0.02 * price), key


def true_sm_mean(fleet: SimulatedFleet, uuid: str, t0: float, t1: float) -> float:
    gpu = fleet.gpu(uuid)
    values = []
    t = t0
    while t <= t1:
        values.append(gpu.activity(gpu.segment_at(t))[0])
        t += STEP_SECONDS
    return sum(values) / len(values)


def test_a_straggler_costs_its_jobs_lost_time_against_truth(
    rig: FleetRig, verdicts: dict[str, dict[str, object]]
) -> None:
    """Every GPU of the job x (the straggler's true SM activity against its peers' median)
    x price, and the verdict names the true straggler and its node."""
    jobs = rig.fleet.jobs_of_kind(ActivityKind.STRAGGLER)
    assert len(jobs) >= 2
    for job in jobs:
        rec = verdicts[job.workload.key]
        evidence = rec["evidence"]
        assert isinstance(evidence, dict)
        (verdict,) = [v for v in evidence["verdicts"] if v["cause"] == "straggler"]
        uuids = gpus_of(rig.fleet, job)
        (slow,) = [u for u in uuids if rig.fleet.gpu(u).lags(job)]
        assert verdict["gpus"] == [slow] and verdict["node"] == job.node
        end = (math.floor(rig.now / 60.0) + 1) * 60.0
        t0 = max(rig.start, end - evidence["window_seconds"])
        peers = sorted(true_sm_mean(rig.fleet, u, t0, rig.now) for u in uuids if u != slow)
        gap = abs(true_sm_mean(rig.fleet, slow, t0, rig.now) - statistics.median(peers))
        price = evidence["price_per_hour"]
        assert verdict["lost_share"] == pytest.approx(gap, abs=0.02)
        assert verdict["money_per_hour"] == pytest.approx(price * gap, abs=0.02 * price)
        assert verdict["money_per_hour"] < evidence["unused_per_hour"]


def test_broken_gpus_money_per_node_and_workload_against_truth(
    rig: FleetRig, verdicts: dict[str, dict[str, object]]
) -> None:
    """The broken_gpus recommendations price exactly the GPUs the simulator breaks: every
    GPU of a faulted job (off the bus or logging XIDs) and of a throttled job, and a
    straggler's throttled GPU, each at its whole price over the window (broken throughout)."""
    with httpx.Client(base_url=rig.url, timeout=10, headers=AUTH) as client:
        answer = client.get("/v1/recommendations", params={"kind": "broken_gpus"})
    answer.raise_for_status()
    body = answer.json()
    items = body["recommendations"] if isinstance(body, dict) else body
    by_node = {r["subject"]: r["evidence"] for r in items}
    broken_kinds = {ActivityKind.FAULTED, ActivityKind.THROTTLED, ActivityKind.STRAGGLER}
    expected: dict[str, dict[str, float]] = {}
    for job in rig.fleet.jobs:
        if job.kind not in broken_kinds:
            continue
        evidence = verdicts[job.workload.key]["evidence"]
        assert isinstance(evidence, dict)
        per_gpu = evidence["price_per_hour"] / len(gpus_of(rig.fleet, job))
        broken = 1 if job.kind is ActivityKind.STRAGGLER else len(gpus_of(rig.fleet, job))
        expected.setdefault(job.node, {})[job.workload.key] = broken * per_gpu
    assert len(expected) >= 2
    assert set(by_node) == set(expected)
    for node, money in expected.items():
        found = by_node[node]["broken_by_workload"]
        assert found == pytest.approx(money, rel=0.02), node
        conditions = set(by_node[node]["broken_by_condition"])
        assert conditions <= {"off_bus", "xid", "throttled"}, node
        off_bus = {
            u
            for j in rig.fleet.jobs
            if j.node == node and falls_off_bus(j)
            for u in gpus_of(rig.fleet, j)
        }
        assert set(by_node[node]["lost_gpus"]) == off_bus, node
        if off_bus:  # the node is short of GPUs by the ones off its bus
            short = by_node[node]["expected_gpus"] - by_node[node]["working_gpus"]
            assert short == len(off_bus), node


def test_metrics_carry_the_recommendations_figures(
    rig: FleetRig, verdicts: dict[str, dict[str, object]]
) -> None:
    """The collector's /metrics shows each verdict's money by workload and cause, and the
    money on broken GPUs by node, workload and condition: the /v1/recommendations figures."""
    with httpx.Client(base_url=rig.url, timeout=10, headers=AUTH) as client:
        text = client.get("/metrics").text
        broken = client.get("/v1/recommendations", params={"kind": "broken_gpus"}).json()
    series: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            series.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    causes = series["gpufleet_workload_bottleneck_unused_cost_per_hour"]
    expected = {}
    for key, rec in verdicts.items():
        evidence = rec["evidence"]
        assert isinstance(evidence, dict)
        for v in evidence["verdicts"]:
            expected[(key, v["cause"])] = v["money_per_hour"]
    found = {(dict(k)["workload"], dict(k)["cause"]): v for k, v in causes.items()}
    assert found == pytest.approx(expected)
    faults = series["gpufleet_gpu_fault_cost_per_hour"]
    by_node: dict[str, float] = {}
    for labels, value in faults.items():
        by_node[dict(labels)["node"]] = by_node.get(dict(labels)["node"], 0.0) + value
    items = broken["recommendations"] if isinstance(broken, dict) else broken
    assert by_node == pytest.approx({r["subject"]: r["evidence"]["broken_per_hour"] for r in items})
    missing = {dict(k)["node"]: v for k, v in series["gpufleet_node_gpus_missing"].items()}
    assert missing == {
        r["subject"]: r["evidence"]["expected_gpus"] - r["evidence"]["working_gpus"]
        for r in items
        if "expected_gpus" in r["evidence"]
    }
    assert missing and all(v > 0 for v in missing.values())


def test_report_bottlenecks_gives_the_api_figures(
    rig: FleetRig, verdicts: dict[str, dict[str, object]]
) -> None:
    """`gpufleet report --bottlenecks` over the collector's ledger: a row per verdict and
    per broken condition with the money /v1/recommendations shows, most money first."""
    out = subprocess.run(
        [sys.executable, "-m", "gpufleet", "report", "--bottlenecks", "--format", "json",
         "--db", rig.settings.ledger.url],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    rows = json.loads(out.stdout)["rows"]
    found = {(r["subject"], r["cause"]): r["money_per_hour"] for r in rows}
    expected: dict[tuple[str, str], float] = {}
    for key, rec in verdicts.items():
        evidence = rec["evidence"]
        assert isinstance(evidence, dict)
        for v in evidence["verdicts"]:
            expected[(key, v["cause"])] = v["money_per_hour"]
    with httpx.Client(base_url=rig.url, timeout=10, headers=AUTH) as client:
        broken = client.get("/v1/recommendations", params={"kind": "broken_gpus"}).json()
    for rec in broken["recommendations"] if isinstance(broken, dict) else broken:
        for item in rec["evidence"]["broken"]:
            cell = (rec["subject"], item["condition"])
            expected[cell] = expected.get(cell, 0.0) + item["money_per_hour"]
    assert found == pytest.approx(expected)
    money = [r["money_per_hour"] for r in rows]
    assert money == sorted(money, reverse=True)
    sentences = {r["sentence"] for r in rows if r["kind"] == "bottleneck"}
    assert all(s.split(": ", 1)[1].startswith("This job uses ~") for s in sentences)
    table = subprocess.run(
        [sys.executable, "-m", "gpufleet", "report", "--bottlenecks",
         "--db", rig.settings.ledger.url],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "Why it wastes" in table.stdout


def test_each_xid_faulted_gpu_names_the_xids_the_simulator_logged(rig: FleetRig) -> None:
    """A broken GPU's evidence carries its hardware XID codes (remediation's drain reason
    quotes them): the codes the simulator made that GPU log, no more and no fewer."""
    with httpx.Client(base_url=rig.url, timeout=10, headers=AUTH) as client:
        answer = client.get("/v1/recommendations", params={"kind": "broken_gpus"}).json()
    items = answer["recommendations"] if isinstance(answer, dict) else answer
    broken = [b for r in items for b in r["evidence"]["broken"] if b["condition"] == "xid"]
    assert broken, "the pathology fleet has XID-faulted GPUs"
    by_key = {j.workload.key: j for j in rig.fleet.jobs}
    for entry in broken:
        gpu, job = rig.fleet.gpu(entry["gpu"]), by_key[entry["workload"]]
        logged: set[int] = set()
        t = rig.start
        while t <= rig.start + RUN_SECONDS:
            segment = gpu.segment_at(t)
            sm, _ = gpu.activity(segment)
            signals = gpu_signals(job, gpu.model, gpu.key, segment, sm, gpu.lags(job))
            logged |= HARDWARE_XIDS.intersection(signals.xid_errors)
            t += STEP_SECONDS
        assert logged and entry["xids"] == sorted(logged), entry


def test_remediation_cordons_exactly_the_nodes_with_faulted_gpus(
    rig: FleetRig, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Remediation on the collector's own fleet view and recommendations after the run:
    cordoned (through the Kubernetes client, against a local API server) are the nodes
    where the simulator faults a job's GPUs (XIDs, some off the bus), and no node whose
    GPUs only throttle or straggle."""
    workdir = tmp_path_factory.mktemp("remedy")
    cluster = FakeKubernetes([], nodes=tuple(n.name for n in rig.fleet.nodes))
    (workdir / "token").write_text(K8S_TOKEN)
    k8s = KubernetesSettings(enabled=True, host=cluster.host, token_file=workdir / "token")
    settings = ActionSettings(kubernetes=k8s, remediation=RemediationSettings(mode="enforce"))
    executors: dict[str, NodeExecutor] = {"kubernetes": KubernetesCordon(api_client(k8s))}
    ledger = Ledger.open(str(workdir / "ledger.db"))
    try:
        remedy = Remediator(settings, ActionLog(ledger), executors)
        now = rig.now
        service = rig.collector.core.service
        entries = remedy.run(service.fleet(now), service.recommendations(None), now)
    finally:
        ledger.close()
        cluster.close()
    faulted = {j.node for j in rig.fleet.jobs if j.kind is ActivityKind.FAULTED}
    throttled = {j.node for j in rig.fleet.jobs if j.kind is ActivityKind.THROTTLED}
    assert faulted and throttled - faulted, "the fleet has nodes of both kinds"
    assert {e.workload_key for e in entries if e.decision == "acted"} == {
        f"node:{n}" for n in faulted
    }
    assert {n for n, state in cluster.nodes.items() if state["unschedulable"]} == faulted
