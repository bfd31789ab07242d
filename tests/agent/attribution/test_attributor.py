"""Attributor end to end: a real gRPC kubelet on a unix socket, fixture /proc trees, manual labels.

The node of these tests: GPUs 0, 1 and 3 whole; GPU 2 in MIG mode with GPU instance 1
(3g.40gb) and GPU instance 2 (2g.20gb). The PIDs are described in
tests/fixtures/proc/README.md.
"""

from __future__ import annotations

import logging
import pwd
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from agent.attribution.attributor import Attributor
from agent.attribution.podresources import api_pb2, api_pb2_grpc
from agent.config import AttributionSettings
from agent.model import GpuInfo, GpuSample, ProcessSample, Workload, WorkloadKind
from agent.stats import AgentStats
from tests.paths import FIXTURES

FIXTURES = FIXTURES
PROC = FIXTURES / "proc"

G0 = "GPU-0a1b2c3d-0000-4000-8000-000000000000"
G1 = "GPU-0a1b2c3d-1111-4111-8111-111111111111"
G2 = "GPU-0a1b2c3d-2222-4222-8222-222222222222"
G3 = "GPU-0a1b2c3d-3333-4333-8333-333333333333"
M21 = "MIG-5f5f5f5f-2121-4121-8121-212121212121"
M22 = "MIG-5f5f5f5f-2222-4222-8222-222222222222"

POD_1001 = "2c9f8a79-5391-454b-88cb-86190881cb96"
POD_1002 = "5a89bcaa-3509-4375-83e1-b9e7a5712123"
POD_1003 = "7d3e1c2a-0b4f-4e8a-9c6d-5f1e2d3c4b5a"
POD_1004 = "9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
CONTAINER_1001 = "containerd://3f2a9d7c1b5e8a4f6d0c2b1a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"

if "mig_gpu_instance_id" in GpuInfo.__struct_fields__:
    MigGpuInfo = GpuInfo
else:

    class MigGpuInfo(GpuInfo, frozen=True, kw_only=True, omit_defaults=True):  # type: ignore[no-redef]
        """GpuInfo with the proposed ``mig_gpu_instance_id`` field, until the contract has it."""

        mig_gpu_instance_id: int | None = None


def node_gpus() -> list[GpuInfo]:
    whole = [
        GpuInfo(uuid=u, index=i, name="NVIDIA H100 80GB HBM3")
        for i, u in [(0, G0), (1, G1), (3, G3)]
    ]
    parent = GpuInfo(uuid=G2, index=2, name="NVIDIA A100-SXM4-80GB", mig_enabled=True)
    migs = [
        MigGpuInfo(
            uuid=M21,
            index=2,
            name="A100 MIG 3g.40gb",
            mig_parent_uuid=G2,
            mig_profile="3g.40gb",
            mig_gpu_instance_id=1,
        ),
        MigGpuInfo(
            uuid=M22,
            index=2,
            name="A100 MIG 2g.20gb",
            mig_parent_uuid=G2,
            mig_profile="2g.20gb",
            mig_gpu_instance_id=2,
        ),
    ]
    return [*whole, parent, *migs]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(
    namespace: str, name: str, *containers: tuple[str, list[tuple[str, list[str]]]]
) -> api_pb2.PodResources:
    return api_pb2.PodResources(
        name=name,
        namespace=namespace,
        containers=[
            api_pb2.ContainerResources(
                name=container,
                devices=[
                    api_pb2.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in devices
                ],
                cpu_ids=[2, 3],
            )
            for container, devices in containers
        ],
    )


class FakeKubelet(api_pb2_grpc.PodResourcesListerServicer):
    """The kubelet's pod-resources service, counting the List calls it serves."""

    def __init__(self, pods: Sequence[api_pb2.PodResources]) -> None:
        self.pods = list(pods)
        self.failure: grpc.StatusCode | None = None
        self._lock = threading.Lock()
        self._calls = 0

    @property
    def calls(self) -> int:
        with self._lock:
            return self._calls

    def List(
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        with self._lock:
            self._calls += 1
        if self.failure is not None:
            context.abort(self.failure, "kubelet is restarting")
        return api_pb2.ListPodResourcesResponse(pod_resources=self.pods)


@contextmanager
def serve_kubelet(socket_path: Path, kubelet: FakeKubelet) -> Iterator[FakeKubelet]:
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(kubelet, server)
    assert server.add_insecure_port(f"unix://{socket_path}") != 0
    server.start()
    try:
        yield kubelet
    finally:
        server.stop(None).wait()


def settings(tmp_path: Path, **overrides: object) -> AttributionSettings:
    values: dict[str, object] = {
        "kubelet_socket": tmp_path / "kubelet.sock",
        "proc_root": PROC,
        "gpustat_dir": tmp_path / "no-gpustat",
        "hpc_job_mapping_dir": None,
        "refresh_seconds": 5.0,
    }
    values.update(overrides)
    return AttributionSettings(**values)  # type: ignore[arg-type]


def sample(uuid: str, *pids: int) -> GpuSample:
    return GpuSample(
        timestamp=1.7e9, gpu_uuid=uuid, processes=tuple(ProcessSample(pid=p) for p in pids)
    )


def by_gpu(samples: Sequence[GpuSample]) -> dict[str, tuple[Workload, ...]]:
    return {s.gpu_uuid: s.workloads for s in samples}


def keys(workloads: Sequence[Workload]) -> list[str]:
    return [w.key for w in workloads]


NODE_PODS = [
    pod("ml", "trainer-0", ("trainer", [("nvidia.com/gpu", [G0])])),
    # time-slicing: two replicas of GPU 1 handed to two pods
    pod("serving", "infer-a", ("server", [("nvidia.com/gpu", [f"{G1}::0"])])),
    pod("serving", "infer-b", ("server", [("nvidia.com/gpu", [f"{G1}::1"])])),
    pod("research", "mig-job", ("main", [("nvidia.com/mig-3g.40gb", [M21])])),
    # not GPUs: an FPGA whose device id happens to be "1", and a CPU-only pod
    pod("fpga", "synth", ("synth", [("example.com/fpga", ["1"])])),
    pod("web", "frontend", ("nginx", [])),
]


def test_pod_resources_name_the_holders_of_each_gpu(tmp_path: Path) -> None:
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS)):
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        result = by_gpu(
            attributor.annotate(node_gpus(), [sample(u) for u in (G0, G1, G2, M21, M22, G3)])
        )
        attributor.close()
    assert result[G0] == (
        Workload(
            kind=WorkloadKind.KUBERNETES_POD,
            id="ml/trainer-0",
            name="trainer-0",
            namespace="ml",
            container="trainer",
        ),
    )
    assert keys(result[G1]) == ["pod:serving/infer-a", "pod:serving/infer-b"]
    assert keys(result[M21]) == ["pod:research/mig-job"]
    assert result[G2] == result[M22] == result[G3] == ()


def test_reads_inside_the_refresh_window_cost_one_rpc(tmp_path: Path) -> None:
    clock = FakeClock()
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS)) as kubelet:
        attributor = Attributor(settings(tmp_path, refresh_seconds=5.0), monotonic=clock)
        for _ in range(10):
            attributor.annotate(node_gpus(), [sample(G0)])
            clock.now += 0.49
        assert kubelet.calls == 1
        clock.now += 0.2  # 5.1 s after the first read
        result = attributor.annotate(node_gpus(), [sample(G0)])
        assert kubelet.calls == 2
        attributor.close()
    assert keys(result[0].workloads) == ["pod:ml/trainer-0"]


def test_new_pods_appear_after_the_refresh(tmp_path: Path) -> None:
    clock = FakeClock()
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS[:1])) as kubelet:
        attributor = Attributor(settings(tmp_path), monotonic=clock)
        assert attributor.annotate(node_gpus(), [sample(G3)])[0].workloads == ()
        kubelet.pods.append(pod("ml", "late", ("c", [("nvidia.com/gpu", [G3])])))
        clock.now += 4.0
        assert attributor.annotate(node_gpus(), [sample(G3)])[0].workloads == ()
        clock.now += 1.0
        assert keys(attributor.annotate(node_gpus(), [sample(G3)])[0].workloads) == ["pod:ml/late"]
        attributor.close()


def test_absent_socket_falls_back_to_other_methods_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    manual = {G3: {"name": "render-farm", "team": "vfx"}}
    attributor = Attributor(settings(tmp_path, manual=manual), monotonic=clock)
    with caplog.at_level(logging.INFO):
        for _ in range(4):
            result = by_gpu(attributor.annotate(node_gpus(), [sample(G0, 2001), sample(G3)]))
            clock.now += 6.0
    attributor.close()
    assert keys(result[G0]) == ["slurm:4242"]
    assert keys(result[G3]) == ["manual:render-farm"]
    assert [r.name for r in caplog.records].count("agent.attribution.kubelet") == 1


def test_failing_kubelet_backs_off_then_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.attribution.kubelet")
    clock = FakeClock()
    stats = AgentStats()
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS)) as kubelet:
        kubelet.failure = grpc.StatusCode.UNAVAILABLE
        attributor = Attributor(settings(tmp_path, manual={"0": {"name": "bench"}}), stats, clock)
        assert keys(attributor.annotate(node_gpus(), [sample(G0)])[0].workloads) == ["manual:bench"]
        clock.now += 5.0  # first retry one refresh later; it fails too
        attributor.annotate(node_gpus(), [sample(G0)])
        clock.now += 9.0  # the next retry waits 2 x refresh
        attributor.annotate(node_gpus(), [sample(G0)])
        assert kubelet.calls == 2
        kubelet.failure = None
        clock.now += 1.0
        result = attributor.annotate(node_gpus(), [sample(G0)])
        assert kubelet.calls == 3
        attributor.close()
    assert keys(result[0].workloads) == ["pod:ml/trainer-0"]
    assert stats.snapshot().field_errors_total == {("", "attribution_kubelet"): 2}
    # one warning for the outage (not one per failed try), one line when it ends
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]


def test_process_cgroup_joins_the_pod_resources_name_through_hostname(tmp_path: Path) -> None:
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS)):
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        [result] = attributor.annotate(node_gpus(), [sample(G0, 1001)])
        attributor.close()
    trainer = Workload(
        kind=WorkloadKind.KUBERNETES_POD,
        id=POD_1001,
        name="trainer-0",
        namespace="ml",
        container="trainer",
    )
    assert result.workloads == (trainer,)
    assert result.processes[0].workload == Workload(
        kind=WorkloadKind.KUBERNETES_POD,
        id=POD_1001,
        name="trainer-0",
        namespace="ml",
        container="trainer",
        labels={"container_id": CONTAINER_1001},
    )


def test_a_pod_without_a_gpu_request_is_seen_per_process_only(tmp_path: Path) -> None:
    # 1003 runs in a pod pod-resources does not list for GPU 1 (NVIDIA_VISIBLE_DEVICES=all)
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS)):
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        [result] = attributor.annotate(node_gpus(), [sample(G1, 1003)])
        attributor.close()
    assert keys(result.workloads) == ["pod:serving/infer-a", "pod:serving/infer-b"]
    assert result.processes[0].workload == Workload(
        kind=WorkloadKind.KUBERNETES_POD,
        id=POD_1003,
        labels={
            "container_id": "cri-o://a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
        },
    )


def test_without_pod_resources_holders_come_from_process_cgroups(tmp_path: Path) -> None:
    attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
    [result] = attributor.annotate(node_gpus(), [sample(G0, 1002, 1004, 1002)])
    attributor.close()
    assert [(w.kind, w.id) for w in result.workloads] == [
        (WorkloadKind.KUBERNETES_POD, POD_1002),
        (WorkloadKind.KUBERNETES_POD, POD_1004),
    ]


def test_slurm_jobs_from_cgroup_paths_and_environ(tmp_path: Path) -> None:
    if _uid_known(4001001):
        pytest.skip("uid 4001001 has an account on this machine")
    attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
    result = by_gpu(
        attributor.annotate(node_gpus(), [sample(G0, 2001), sample(G1, 2002), sample(G3, 2003)])
    )
    attributor.close()
    assert result[G0] == (
        Workload(
            kind=WorkloadKind.SLURM_JOB,
            id="4242",
            name="bert-pretrain",
            slurm_job_id="4242",
            user="alice",
            labels={"slurm_step": "0", "slurm_account": "nlp", "slurm_partition": "gpu"},
        ),
    )
    assert result[G1] == (
        Workload(
            kind=WorkloadKind.SLURM_JOB,
            id="4343",
            slurm_job_id="4343",
            user="4001001",
            labels={"slurm_step": "batch"},
        ),
    )
    assert result[G3] == (
        Workload(
            kind=WorkloadKind.SLURM_JOB,
            id="4444",
            slurm_job_id="4444",
            user="carol",
            labels={"slurm_step": "0"},
        ),
    )


def test_bare_and_vanished_processes(tmp_path: Path) -> None:
    attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
    gone = GpuSample(
        timestamp=1.7e9,
        gpu_uuid=G1,
        processes=(ProcessSample(pid=3002, name="zombie"), ProcessSample(pid=987654, name="ghost")),
    )
    result = attributor.annotate(node_gpus(), [sample(G0, 3001), gone])
    attributor.close()
    xorg = Workload(kind=WorkloadKind.PROCESS, id="3001", name="Xorg", user="root")
    assert result[0].workloads == (xorg,)
    assert result[0].processes[0].workload == xorg
    assert [p.workload for p in result[1].processes] == [
        Workload(kind=WorkloadKind.PROCESS, id="3002", name="zombie"),
        Workload(kind=WorkloadKind.PROCESS, id="987654", name="ghost"),
    ]


def test_precedence_pods_over_slurm_over_mapping_over_manual_over_processes(tmp_path: Path) -> None:
    gpustat = tmp_path / "gpustat"
    gpustat.mkdir()
    for gpu in ("0", "1", "3"):
        (gpustat / gpu).write_text("9090 0\n")
    manual = {G0: {"name": "m0"}, G1: {"name": "m1"}, G3: {"name": "m3"}, "2": {"name": "m2"}}
    attributor = Attributor(
        settings(tmp_path, gpustat_dir=gpustat, manual=manual), monotonic=FakeClock()
    )
    samples = [
        sample(G0, 3001, 2001, 1002),
        sample(G1, 3001, 2001),
        sample(G3, 3001),
        sample(M22, 3001),
    ]
    annotated = attributor.annotate(node_gpus(), samples)
    attributor.close()
    result = by_gpu(annotated)
    assert keys(result[G0]) == [f"pod:/{POD_1002}"]
    assert keys(result[G1]) == ["slurm:4242"]
    assert keys(result[G3]) == ["slurm:9090"]
    assert keys(result[M22]) == ["manual:m2"]  # a label on the parent's index covers its MIG slices
    # each process keeps its own workload whatever holds the GPU
    assert [p.workload.key for p in annotated[0].processes if p.workload] == [
        "process:3001",
        "slurm:4242",
        f"pod:/{POD_1002}",
    ]


def _uid_known(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def test_manual_labels_by_uuid_parent_uuid_and_index(tmp_path: Path) -> None:
    manual = {
        G0: {"name": "render-farm", "namespace": "vfx", "team": "graphics", "cost_center": "cc-42"},
        "1": {"team": "nlp", "user": "dana"},
        G2: {"name": "mig-pool"},
    }
    attributor = Attributor(settings(tmp_path, manual=manual), monotonic=FakeClock())
    result = by_gpu(attributor.annotate(node_gpus(), [sample(u) for u in (G0, G1, G2, M21, G3)]))
    attributor.close()
    assert result[G0] == (
        Workload(
            kind=WorkloadKind.MANUAL,
            id="render-farm",
            name="render-farm",
            namespace="vfx",
            team="graphics",
            labels={"cost_center": "cc-42"},
        ),
    )
    assert result[G1] == (Workload(kind=WorkloadKind.MANUAL, id="1", team="nlp", user="dana"),)
    assert keys(result[G2]) == keys(result[M21]) == ["manual:mig-pool"]
    assert result[G3] == ()


def test_samples_that_carry_workloads_pass_through_untouched(tmp_path: Path) -> None:
    simulated = Workload(kind=WorkloadKind.KUBERNETES_POD, id="u-1", name="sim", namespace="demo")
    held = GpuSample(
        timestamp=1.7e9, gpu_uuid=G0, workloads=(simulated,), processes=(ProcessSample(pid=3001),)
    )
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS)) as kubelet:
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        [result] = attributor.annotate(node_gpus(), [held])
        attributor.close()
    assert result is held
    assert kubelet.calls == 0


def test_a_shared_gpu_lists_each_workload_once(tmp_path: Path) -> None:
    pods = [
        # one pod holding two time-sliced replicas of GPU 0 from two containers
        pod(
            "serving",
            "infer-a",
            ("server", [("nvidia.com/gpu", [f"{G0}::0"])]),
            ("sidecar", [("nvidia.com/gpu", [f"{G0}::3"])]),
        ),
        pod("serving", "infer-b", ("server", [("nvidia.com/gpu.shared", [f"{G0}::1"])])),
    ]
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(pods)):
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        [result] = attributor.annotate(node_gpus(), [sample(G0, 2001, 2001)])
        attributor.close()
    assert keys(result.workloads) == ["pod:serving/infer-a", "pod:serving/infer-b"]
    assert [p.workload.key for p in result.processes if p.workload] == ["slurm:4242", "slurm:4242"]


def test_mig_device_ids_in_every_form(tmp_path: Path) -> None:
    pods = [
        # device plugins before MIG UUIDs: MIG-<parent GPU UUID>/<GPU instance>/<compute instance>
        pod("a", "old-plugin", ("c", [("nvidia.com/mig-2g.20gb", [f"MIG-{G2}/2/0"])])),
        # EKS suffixes MIG ids for sharing; GKE names MIG slices nvidia<index>/gi<id>
        pod("b", "eks", ("c", [("nvidia.com/mig-3g.40gb", [f"{M21}::2"])])),
        pod("c", "gke", ("c", [("nvidia.com/gpu", ["nvidia2/gi1/vgpu0"])])),
        # deviceIDStrategy=index
        pod("d", "by-index", ("c", [("nvidia.com/gpu", ["3"])])),
    ]
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(pods)):
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        result = by_gpu(attributor.annotate(node_gpus(), [sample(u) for u in (G2, M21, M22, G3)]))
        attributor.close()
    assert keys(result[M22]) == ["pod:a/old-plugin"]
    assert keys(result[M21]) == ["pod:b/eks", "pod:c/gke"]
    assert keys(result[G3]) == ["pod:d/by-index"]
    assert result[G2] == ()
