"""Enforcement on a simulated fleet through the real collector (agents -> HTTP -> pipeline ->
recommendations -> auto-release -> chat): warnings at 50 % and 90 %, the action at the
deadline against a local Kubernetes API server and a ``scancel`` stand-in on PATH, a
signed Feishu card for each step; nothing for exempt or active workloads."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.sources.simulated.source import ActivityKind, build_fleet
from collector.actions.settings import (
    ActionSettings,
    KubernetesSettings,
    PolicySettings,
    SlurmSettings,
)
from collector.config import AnalysisSettings, CollectorSettings, LedgerSettings, ServerSettings
from collector.notify.settings import ChannelSettings, NotificationSettings
from gpufleet.cli.collector import build_collector, serve
from gpufleet.cli.demo_fleet import SimClock
from tests.collector.actions import fake_scancel
from tests.collector.actions.fake_kubernetes import TOKEN as K8S_TOKEN
from tests.collector.actions.fake_kubernetes import FakeKubernetes, FakePod
from tests.collector.notify.fake_services import FakeService
from tests.e2e.fleet_rig import TOKEN, build_agent, free_port

pytestmark = pytest.mark.slow

STEP = 60.0
SHIP_EVERY = 5  # ship, apply, evaluate and run alerting every 5 simulated minutes
HOUR = 3600.0


def test_stuck_jobs_are_warned_then_released_and_nothing_else_is(tmp_path: Path) -> None:
    fleet = build_fleet()
    start = fleet.nodes[0].epoch
    clock = SimClock(start)
    stuck = {j.workload.key: j for j in fleet.jobs_of_kind(ActivityKind.STUCK)}
    assert set(stuck) == {
        "slurm:842992",
        "pod:research/sweep-worker-3283c",
        "pod:research/sweep-worker-a7271",
    }
    cluster = FakeKubernetes(
        [
            FakePod("research", "sweep-worker-3283c", owner=("Deployment", "sweep")),
            FakePod("research", "sweep-worker-a7271", labels={"gpufleet.io/exempt": "true"}),
            *[
                FakePod(j.workload.namespace or "", j.workload.name or "")
                for k in ActivityKind
                if k is not ActivityKind.STUCK
                for j in fleet.jobs_of_kind(k)
                if j.workload.key.startswith("pod:")
            ],
        ]
    )
    scancel_log = fake_scancel.install(tmp_path / "bin")
    chat = FakeService("feishu", secret="feishu-enforce-secret", now=clock)
    token_file = tmp_path / "k8s-token"
    token_file.write_text(K8S_TOKEN)
    port = free_port()
    settings = CollectorSettings(
        server=ServerSettings(port=port, tokens=[TOKEN], public_url=f"http://127.0.0.1:{port}"),
        ledger=LedgerSettings(url=str(tmp_path / "ledger.db")),
        analysis=AnalysisSettings(stale_after_seconds=3 * STEP),
        notifications=NotificationSettings(
            channels=[
                ChannelSettings(
                    name="research-chat", kind="feishu", url=chat.url, secret=chat.secret
                )
            ]
        ),
        actions=ActionSettings(
            default=PolicySettings(
                mode="enforce",
                dry_run=False,
                release_after_seconds=2 * HOUR,
                warn_at=[0.5, 0.9],
                min_runtime_seconds=HOUR,
            ),
            # a per-namespace policy: notebooks are only told, never released
            policies={"notebooks": PolicySettings(mode="notify", release_after_seconds=2 * HOUR)},
            max_data_age_seconds=3 * STEP,
            kubernetes=KubernetesSettings(enabled=True, host=cluster.host, token_file=token_file),
            slurm=SlurmSettings(
                enabled=True,
                scancel_path=str(tmp_path / "bin" / "scancel"),
                scontrol_path=str(tmp_path / "bin" / "scontrol"),
                reason_option="--reason",
            ),
        ),
    )
    collector = build_collector(settings, clock, tokens=frozenset([TOKEN]))
    server = serve(collector)
    agents = [
        build_agent(node, f"http://127.0.0.1:{port}", clock, STEP, tmp_path / "spool" / node.name)
        for node in fleet.nodes
    ]
    try:
        ticks = 0
        end = start + 2 * HOUR + 15 * 60
        while start + ticks * STEP <= end:
            clock.set(start + ticks * STEP)
            for agent in agents:
                agent.sampler.tick()
            ticks += 1
            if ticks % SHIP_EVERY == 0:
                for agent in agents:
                    agent.shipper.flush()
                collector.core.applier.tick()
                collector.core.recommender.evaluate_if_due()
                collector.alert()
        entries = collector.alerting.engine.log.entries()  # type: ignore[union-attr]
    finally:
        for agent in agents:
            agent.shipper.close()
        server.should_exit = True
        collector.stop()
        cluster.close()
        chat.close()

    by_key: dict[str, list[tuple[str, str, float]]] = {}
    for e in entries:
        by_key.setdefault(e.workload_key, []).append((e.stage, e.decision, e.at - start))
    # only the stuck jobs and idle notebooks: no training, inference or data-loader job
    notebooks = {k for k in by_key if k.startswith("pod:notebooks/")}
    assert set(by_key) == set(stuck) | notebooks and notebooks
    for key in notebooks:
        assert {d for _, d, _ in by_key[key]} <= {"warned", "notify_only"}
    for key in ("pod:research/sweep-worker-3283c", "slurm:842992"):
        steps = by_key[key]
        assert [(s, d) for s, d, _ in steps] == [
            ("warn:0.5", "warned"),
            ("warn:0.9", "warned"),
            ("act", "acted"),
        ]
        (_, _, warn1), (_, _, warn2), (_, _, acted) = steps
        # idle from the first sample: deadline = start + 2 h (min runtime 1 h is shorter);
        # each step falls on the first 5-minute pass at or after its point
        assert HOUR <= warn1 < HOUR + 300
        assert 0 <= warn2 - 1.8 * HOUR < 300
        assert 2 * HOUR <= acted < 2 * HOUR + 300
    assert [(s, d) for s, d, _ in by_key["pod:research/sweep-worker-a7271"]] == [
        ("skip:exempt", "skipped")
    ]
    # the cluster saw exactly one change: the stuck pod's Deployment scaled to zero
    assert [(c.method, c.path, c.body) for c in cluster.mutations()] == [
        (
            "PATCH",
            "/apis/apps/v1/namespaces/research/deployments/sweep/scale",
            {"spec": {"replicas": 0}},
        )
    ]
    calls = fake_scancel.calls(scancel_log)
    assert len(calls) == 1 and calls[0][1] == "--reason" and calls[0][-1] == "842992"
    assert calls[0][2].startswith("gpufleet: GPUs idle since")
    # and the chat heard each step, signed (the fake refuses a bad signature)
    assert chat.received and all(r.ok for r in chat.received)
    titles = [r.json["card"]["header"]["title"]["content"] for r in chat.received]
    assert "Released: pod research/sweep-worker-3283c" in titles
    assert "Released: Slurm job 842992" in titles
    assert "Not released: pod research/sweep-worker-a7271" in titles
    warnings = [t for t in titles if "its GPUs will be released at" in t]
    assert len([t for t in warnings if "sweep-worker-3283c" in t]) == 2
    opt_out = "kubectl label pod -n research sweep-worker-3283c gpufleet.io/exempt=true"
    assert any(opt_out in r.body.decode() for r in chat.received)
    # every message before the release gives the command that does it by hand, the
    # opening recommendation as much as the warnings: the pod's Deployment, scaled (deleting
    # the pod would only make the Deployment start another on the GPU)
    about = [(t, r.body.decode()) for t, r in zip(titles, chat.received, strict=True)]
    before = [(t, b) for t, b in about if "sweep-worker-3283c" in b and "Released" not in t]
    assert [t.split(":")[0] for t, _ in before] == [
        "Release 1 idle A100 held by pod research/sweep-worker-3283c",
        "pod research/sweep-worker-3283c",
        "pod research/sweep-worker-3283c",
    ]
    scale = "kubectl scale deployment -n research sweep --replicas=0"
    assert all(scale in body for _, body in before)
    assert not any("kubectl delete pod" in body for _, body in before)
    assert any("scancel 842992" in r.body.decode() for r in chat.received)
