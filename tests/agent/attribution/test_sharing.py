"""Shared GPUs recognised from what the kubelet lists: a real gRPC pod-resources server on
a unix socket, the real Attributor, and the workloads it sends."""

from __future__ import annotations

from pathlib import Path

from agent.attribution.attributor import Attributor
from agent.attribution.sharing import MPS_SERVER_PROCESS
from agent.model import GpuSample, ProcessSample, Workload
from tests.agent.attribution.test_attributor import (
    G0,
    G1,
    G3,
    FakeClock,
    FakeKubelet,
    node_gpus,
    pod,
    serve_kubelet,
    settings,
)


def annotate(
    tmp_path: Path, pods: list[object], *samples: GpuSample
) -> dict[str, tuple[Workload, ...]]:
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(pods)):
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        annotated = attributor.annotate(node_gpus(), list(samples))
        attributor.close()
    return {s.gpu_uuid: s.workloads for s in annotated}


def sharing(workloads: tuple[Workload, ...]) -> dict[str, tuple[str | None, float | None]]:
    return {w.key: (w.gpu_sharing, w.gpu_share) for w in workloads}


def gpu(uuid: str, *names: str) -> GpuSample:
    """A sample of ``uuid`` with processes of ``names`` (PIDs no /proc fixture has)."""
    processes = tuple(ProcessSample(pid=90000 + i, name=n) for i, n in enumerate(names))
    return GpuSample(timestamp=1.7e9, gpu_uuid=uuid, processes=processes)


def test_hami_and_volcano_declare_their_cores_as_the_share(tmp_path: Path) -> None:
    cores = [str(i) for i in range(30)]  # the kubelet lists a counted resource's units as ids
    pods = [
        pod(
            "ml",
            "hami-a",
            (
                "main",
                [
                    ("nvidia.com/gpu", [G0]),
                    ("nvidia.com/gpucores", cores),
                    ("nvidia.com/gpumem", [str(i) for i in range(4)]),
                ],
            ),
        ),
        pod("ml", "hami-b", ("main", [("nvidia.com/gpu", [G0]), ("nvidia.com/gpumem", ["0"])])),
        pod(
            "batch",
            "vc",
            (
                "main",
                [
                    ("volcano.sh/vgpu-number", [G1]),
                    ("volcano.sh/vgpu-cores", [str(i) for i in range(45)]),
                ],
            ),
        ),
    ]
    found = annotate(tmp_path, pods, gpu(G0), gpu(G1))
    assert sharing(found[G0]) == {"pod:ml/hami-a": ("hami", 0.3), "pod:ml/hami-b": ("hami", None)}
    assert sharing(found[G1]) == {"pod:batch/vc": ("volcano", 0.45)}


def test_time_slicing_replicas_the_renamed_resource_and_one_id_for_two_pods(
    tmp_path: Path,
) -> None:
    pods = [
        pod("a", "replica", ("c", [("nvidia.com/gpu", [f"{G0}::0"])])),
        pod("a", "renamed", ("c", [("nvidia.com/gpu.shared", [f"{G0}::1"])])),
        pod("b", "one", ("c", [("nvidia.com/gpu", [G1])])),
        pod("b", "two", ("c", [("nvidia.com/gpu", [G1])])),
        pod("c", "alone", ("c", [("nvidia.com/gpu", [G3])])),
    ]
    found = annotate(tmp_path, pods, gpu(G0), gpu(G1), gpu(G3))
    assert set(sharing(found[G0]).values()) == {("time_slicing", None)}
    assert set(sharing(found[G1]).values()) == {("time_slicing", None)}
    assert sharing(found[G3]) == {"pod:c/alone": (None, None)}  # a GPU of its own


def test_replicas_where_the_mps_server_runs_are_mps(tmp_path: Path) -> None:
    pods = [
        pod("a", "one", ("c", [("nvidia.com/gpu", [f"{G0}::0"])])),
        pod("a", "two", ("c", [("nvidia.com/gpu", [f"{G0}::1"])])),
        pod("a", "three", ("c", [("nvidia.com/gpu", [f"{G1}::0"])])),
        pod("a", "four", ("c", [("nvidia.com/gpu", [f"{G1}::1"])])),
    ]
    found = annotate(tmp_path, pods, gpu(G0, MPS_SERVER_PROCESS, "python"), gpu(G1, "python"))
    assert set(sharing(found[G0]).values()) == {("mps", None)}
    assert set(sharing(found[G1]).values()) == {("time_slicing", None)}
