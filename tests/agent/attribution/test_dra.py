"""GPUs allocated through a ResourceClaim (Dynamic Resource Allocation): the kubelet's
pod-resources List names them under a container's ``dynamic_resources`` with the DRA
driver's device name, and the agent attributes the GPU to the claim's pod. The service is
served over gRPC on a unix socket, as the kubelet does."""

from __future__ import annotations

from pathlib import Path

from agent.attribution.attributor import Attributor
from agent.attribution.podresources import api_pb2
from tests.agent.attribution.test_attributor import (
    G0,
    G1,
    G2,
    G3,
    M21,
    M22,
    FakeClock,
    FakeKubelet,
    by_gpu,
    keys,
    node_gpus,
    pod,
    sample,
    serve_kubelet,
    settings,
)


def claimed(
    namespace: str, name: str, container: str, *devices: tuple[str, str]
) -> api_pb2.PodResources:
    """A pod whose container got ``devices`` ((driver, device name)) through one claim."""
    results = [
        api_pb2.ClaimResource(
            driver_name=driver, pool_name="gpu-node-03", device_name=device,
            cdi_devices=[api_pb2.CDIDevice(name=f"k8s.{driver}/claim={name}-{device}")],
        )
        for driver, device in devices
    ]  # fmt: skip
    resources = api_pb2.DynamicResource(
        claim_name=f"{name}-gpu", claim_namespace=namespace, claim_resources=results
    )
    return api_pb2.PodResources(
        name=name,
        namespace=namespace,
        containers=[api_pb2.ContainerResources(name=container, dynamic_resources=[resources])],
    )


PODS = [
    claimed("ml", "llm-serve-0", "vllm", ("gpu.nvidia.com", "gpu-3")),
    # two GPUs in one claim, one of them also named by a device plugin for another pod
    claimed("ml", "trainer-0", "pytorch", ("gpu.nvidia.com", "gpu-0"), ("gpu.nvidia.com", "gpu-1")),
    pod("serving", "infer-a", ("server", [("nvidia.com/gpu", [G1])])),
    # another driver's device named like a GPU, and a MIG device of the NVIDIA driver
    claimed("net", "rdma", "main", ("dra.example.com", "gpu-2")),
    claimed("research", "mig-job", "main", ("gpu.nvidia.com", "gpu-2-mig-9-4-4")),
]


def test_a_gpu_allocated_through_a_claim_is_held_by_its_pod(tmp_path: Path) -> None:
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(PODS)):
        attributor = Attributor(settings(tmp_path), monotonic=FakeClock())
        result = by_gpu(
            attributor.annotate(node_gpus(), [sample(u) for u in (G0, G1, G2, M21, M22, G3)])
        )
        attributor.close()
    assert keys(result[G3]) == ["pod:ml/llm-serve-0"]
    assert result[G3][0].container == "vllm"
    assert keys(result[G0]) == ["pod:ml/trainer-0"]
    assert sorted(keys(result[G1])) == ["pod:ml/trainer-0", "pod:serving/infer-a"]
    # neither another driver's device nor a MIG device without its instance id is guessed
    assert result[G2] == result[M21] == result[M22] == ()
