"""The Kubernetes executor through the official client against a local API server, and the
Slurm executor against a ``scancel`` stand-in on PATH."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.actions.engine import Executors
from collector.actions.executors import ExecutorError, SlurmExecutor, Target
from collector.actions.kubernetes import KubernetesExecutor, api_client
from collector.actions.release_commands import CommandBook
from collector.actions.settings import KubernetesSettings, SlurmSettings
from collector.records import WorkloadRef
from tests.collector.actions import fake_scancel
from tests.collector.actions.fake_kubernetes import TOKEN, FakeKubernetes, FakePod

PODS = [
    FakePod("ml", "web-7d9f8-abcde", owner=("Deployment", "web")),
    FakePod("ml", "db-0", owner=("StatefulSet", "db")),
    FakePod("ml", "notebook", owner=None),
    FakePod("ml", "batch-x1", owner=("Job", "batch")),
    FakePod("ml", "keep-me", labels={"gpufleet.io/exempt": "true"}),
    FakePod("ml", "keep-me-too", annotations={"gpufleet.io/exempt": "True"}),
]


@pytest.fixture
def cluster() -> Iterator[FakeKubernetes]:
    server = FakeKubernetes(list(PODS))
    yield server
    server.close()


def executor(
    cluster: FakeKubernetes, tmp_path: Path, scale_owners: bool = True
) -> KubernetesExecutor:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    settings = KubernetesSettings(
        enabled=True, host=cluster.host, token_file=token, scale_owners=scale_owners
    )
    return KubernetesExecutor(api_client(settings), settings, "gpufleet.io/exempt")


def pod(name: str) -> Target:
    return Target(f"pod:ml/{name}", "pod", "ml", name)


def test_a_deployments_pod_scales_the_deployment_to_zero(
    cluster: FakeKubernetes, tmp_path: Path
) -> None:
    done = executor(cluster, tmp_path).release(pod("web-7d9f8-abcde"), "idle")
    assert done == "scale Deployment ml/web to 0"
    assert cluster.scales == {("Deployment", "ml", "web"): 0}
    patch = cluster.mutations()
    assert [(c.method, c.path) for c in patch] == [
        ("PATCH", "/apis/apps/v1/namespaces/ml/deployments/web/scale")
    ]
    assert patch[0].body == {"spec": {"replicas": 0}} and "patch" in patch[0].content_type
    assert cluster.deleted == []


def test_a_statefulsets_pod_scales_the_statefulset(cluster: FakeKubernetes, tmp_path: Path) -> None:
    assert executor(cluster, tmp_path).release(pod("db-0"), "idle") == (
        "scale StatefulSet ml/db to 0"
    )
    assert cluster.scales == {("StatefulSet", "ml", "db"): 0}


@pytest.mark.parametrize("name", ["notebook", "batch-x1"])
def test_a_bare_or_job_pod_is_deleted(cluster: FakeKubernetes, tmp_path: Path, name: str) -> None:
    assert executor(cluster, tmp_path).release(pod(name), "idle") == f"delete pod ml/{name}"
    assert cluster.deleted == [("ml", name)] and cluster.scales == {}


def test_with_scale_owners_off_the_pod_is_deleted(cluster: FakeKubernetes, tmp_path: Path) -> None:
    executor(cluster, tmp_path, scale_owners=False).release(pod("web-7d9f8-abcde"), "idle")
    assert cluster.deleted == [("ml", "web-7d9f8-abcde")] and cluster.scales == {}


@pytest.mark.parametrize("name", ["keep-me", "keep-me-too"])
def test_an_exempt_pod_is_never_touched(cluster: FakeKubernetes, tmp_path: Path, name: str) -> None:
    ex = executor(cluster, tmp_path)
    seen = ex.inspect(pod(name))
    assert seen.exists and seen.exempt
    assert seen.opt_out == f"kubectl label pod -n ml {name} gpufleet.io/exempt=true"
    with pytest.raises(ExecutorError, match="exempt"):
        ex.release(pod(name), "idle")
    assert cluster.mutations() == []


def test_a_missing_pod_and_a_forbidden_call(cluster: FakeKubernetes, tmp_path: Path) -> None:
    ex = executor(cluster, tmp_path)
    assert not ex.inspect(pod("gone")).exists
    with pytest.raises(ExecutorError, match="no longer exists"):
        ex.release(pod("gone"), "idle")
    cluster.forbid.add("DELETE")
    with pytest.raises(ExecutorError, match="HTTP 403"):
        ex.release(pod("notebook"), "idle")
    assert all(c.authorization == f"Bearer {TOKEN}" for c in cluster.calls)


def test_scancel_gets_the_signal_the_reason_and_the_job_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = fake_scancel.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", fake_scancel.path_with(tmp_path / "bin"))
    settings = SlurmSettings(enabled=True, signal="TERM", reason_option="--reason")
    target = Target("slurm:842992", "slurm", "gpu", "842992", "emeka")
    done = SlurmExecutor(settings).release(target, "gpufleet: idle 4 h")
    assert fake_scancel.calls(log) == [
        [
            str(tmp_path / "bin" / "scancel"),
            "--signal=TERM",
            "--reason",
            "gpufleet: idle 4 h",
            "842992",
        ]
    ]
    assert done == "scancel --signal=TERM 842992"


def test_scancel_failure_and_a_bad_job_id_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = fake_scancel.install(tmp_path / "bin", fail=True)
    monkeypatch.setenv("PATH", fake_scancel.path_with(tmp_path / "bin"))
    ex = SlurmExecutor(SlurmSettings(enabled=True))
    with pytest.raises(ExecutorError, match="exited 1: scancel: error: Kill job error"):
        ex.release(Target("slurm:1", "slurm", "", "1"), "idle")
    with pytest.raises(ExecutorError, match="not a job id"):
        ex.release(Target("slurm:1;rm", "slurm", "", "1;rm -rf /"), "idle")
    assert fake_scancel.calls(log) == [[str(tmp_path / "bin" / "scancel"), "1"]]


def test_the_webhook_executor_posts_a_signed_release_request() -> None:
    import httpx

    from collector.actions.executors import WebhookExecutor
    from tests.collector.notify.fake_services import FakeService

    secret = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM="
    receiver = FakeService("webhook", secret=secret)
    try:
        target = Target("process:4242", "process", "", "4242")
        done = WebhookExecutor(receiver.url, secret, httpx.HTTPTransport()).release(target, "idle")
        assert done == "release request for process:4242 accepted"
        (request,) = receiver.received
        assert request.ok  # the receiver checked the Standard Webhooks signature
        assert request.json == {
            "action": "release",
            "workload": "process:4242",
            "kind": "process",
            "namespace": "",
            "name": "4242",
            "reason": "idle",
        }
        receiver.script.append((500, {}, b""))
        with pytest.raises(ExecutorError, match="HTTP 500"):
            WebhookExecutor(receiver.url, secret, httpx.HTTPTransport()).release(target, "idle")
    finally:
        receiver.close()


def test_release_commands_come_from_the_executor_once_per_workload(
    cluster: FakeKubernetes, tmp_path: Path
) -> None:
    book = CommandBook(Executors(kubernetes=executor(cluster, tmp_path)))
    refs = [
        WorkloadRef(f"pod:ml/{name}", "kubernetes_pod", name, "ml")
        for name in ("web-7d9f8-abcde", "db-0", "gone-pod")
    ]
    job = WorkloadRef("slurm:842992", "slurm_job", "842992", "gpu")
    assert book.commands([*refs, job]) == {
        "pod:ml/web-7d9f8-abcde": "kubectl scale deployment -n ml web --replicas=0",
        "pod:ml/db-0": "kubectl scale statefulset -n ml db --replicas=0",
        "pod:ml/gone-pod": "kubectl delete pod -n ml gone-pod",  # not found: the key's own
        "slurm:842992": "scancel 842992",  # no Slurm executor: the key's own
    }
    asked = len(cluster.calls)
    assert book.commands(refs[:1])["pod:ml/web-7d9f8-abcde"].startswith("kubectl scale")
    assert len(cluster.calls) == asked  # kept: the API is not asked again
    cluster.forbid.add("GET")  # the API refuses: the key's own command, asked again later
    assert book.commands(refs[1:2]) == {"pod:ml/db-0": "kubectl delete pod -n ml db-0"}
    cluster.forbid.clear()
    assert book.commands(refs[1:2]) == {
        "pod:ml/db-0": "kubectl scale statefulset -n ml db --replicas=0"
    }
