"""The pod-resources client against a real gRPC server, and device-id parsing."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from agent.attribution.devices import DeviceRef, GpuDirectory, parse_device_id
from agent.attribution.kubelet import (
    PodDevice,
    PodResourcesCache,
    PodResourcesClient,
    PodResourcesUnavailable,
    gpu_devices,
)
from agent.attribution.podresources import api_pb2
from agent.attribution.sharing import Sharing
from tests.agent.attribution.test_attributor import (
    G0,
    G1,
    G2,
    G3,
    M21,
    M22,
    NODE_PODS,
    FakeClock,
    FakeKubelet,
    node_gpus,
    pod,
    serve_kubelet,
)

#: replicas (``::N`` device ids) are time-slicing's unless the MPS server runs (test_sharing.py)
TIME_SLICED = Sharing("time_slicing")
UUID = "GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763"


@pytest.mark.parametrize(
    ("device_id", "expected"),
    [
        (UUID, DeviceRef(uuid=UUID)),
        (f"{UUID}::3", DeviceRef(uuid=UUID)),
        (
            "MIG-5f5f5f5f-2121-4121-8121-212121212121",
            DeviceRef(uuid="MIG-5f5f5f5f-2121-4121-8121-212121212121"),
        ),
        (
            "MIG-5f5f5f5f-2121-4121-8121-212121212121::0",
            DeviceRef(uuid="MIG-5f5f5f5f-2121-4121-8121-212121212121"),
        ),
        (f"MIG-{UUID}/7/0", DeviceRef(uuid=UUID, gpu_instance_id=7)),
        ("5", DeviceRef(index=5)),
        ("5.2", DeviceRef(index=5, gpu_instance_id=2)),
        ("nvidia5", DeviceRef(index=5)),
        ("nvidia5/vgpu3", DeviceRef(index=5)),
        ("nvidia5/gi2/vgpu0", DeviceRef(index=5, gpu_instance_id=2)),
        ("README", None),
        ("0000:3b:00.0", None),
    ],
)
def test_parse_device_id(device_id: str, expected: DeviceRef | None) -> None:
    assert parse_device_id(device_id) == expected


def test_directory_resolves_indices_and_gpu_instances() -> None:
    directory = GpuDirectory(node_gpus())
    assert directory.resolve_id("1") == G1
    assert directory.resolve_id("2.1") == M21
    assert directory.resolve_id(f"MIG-{G2}/2/0") == M22
    assert directory.resolve_id("2.9") is None  # no such GPU instance
    assert directory.resolve_id("7") is None  # no such GPU
    assert directory.physical_index(M22) == 2
    assert directory.physical_index(G3) == 3


def test_only_gpu_resources_are_kept() -> None:
    response = api_pb2.ListPodResourcesResponse(pod_resources=NODE_PODS)
    assert gpu_devices(response) == [
        PodDevice("ml", "trainer-0", "trainer", "nvidia.com/gpu", G0),
        PodDevice("serving", "infer-a", "server", "nvidia.com/gpu", f"{G1}::0", TIME_SLICED),
        PodDevice("serving", "infer-b", "server", "nvidia.com/gpu", f"{G1}::1", TIME_SLICED),
        PodDevice("research", "mig-job", "main", "nvidia.com/mig-3g.40gb", M21),
    ]


def test_list_over_the_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.sock"
    with serve_kubelet(path, FakeKubelet(NODE_PODS)) as kubelet:
        client = PodResourcesClient(path)
        assert len(client.list_gpu_devices()) == 4
        assert len(client.list_gpu_devices()) == 4  # the channel is reused
        client.close()
    assert kubelet.calls == 2


def test_absent_socket_raises_without_connecting(tmp_path: Path) -> None:
    client = PodResourcesClient(tmp_path / "kubelet.sock")
    with pytest.raises(PodResourcesUnavailable, match="does not exist"):
        client.list_gpu_devices()
    client.close()


def test_stale_socket_file_raises(tmp_path: Path) -> None:
    # a kubelet that died leaves its socket file behind; nobody listens on it
    path = tmp_path / "kubelet.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()
    client = PodResourcesClient(path, timeout_seconds=1.0)
    with pytest.raises(PodResourcesUnavailable, match=r"UNAVAILABLE|DEADLINE_EXCEEDED"):
        client.list_gpu_devices()
    client.close()


class SlowKubelet(FakeKubelet):
    def List(self, request, context):  # type: ignore[no-untyped-def]
        response = super().List(request, context)  # counts the call
        time.sleep(0.5)
        return response


def test_a_wedged_kubelet_costs_one_timeout_per_backoff(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.sock"
    clock = FakeClock()
    with serve_kubelet(
        path, SlowKubelet([pod("ml", "p", ("c", [("nvidia.com/gpu", [G0])]))])
    ) as kubelet:
        cache = PodResourcesCache(PodResourcesClient(path, timeout_seconds=0.1), 5.0, clock)
        for _ in range(20):
            assert cache.devices() == []
            clock.now += 0.5
        cache.close()
    # 10 s of reads: tries at 0, 5 (backoff 10 next), so two timeouts, not twenty
    assert kubelet.calls == 2
