"""Which pods hold which GPUs, from the kubelet pod-resources v1 ``List`` call.

The kubelet serves ``v1.PodResourcesLister`` on a unix socket (default
``/var/lib/kubelet/pod-resources/kubelet.sock``; no RBAC, file permissions only). ``List``
names each pod's namespace, name and containers with their device ids; it does not give
the pod UID. This tells who *holds* a GPU even when the pod runs no CUDA process, which
is the allocated-idle case. The answer is cached: one RPC per refresh period, never one
per read.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.attribution.sharing import NOT_SHARED, Sharing, container_sharing
from agent.stats import AgentStats

if TYPE_CHECKING:
    import grpc

    from agent.attribution.podresources import api_pb2

log = logging.getLogger(__name__)

#: a local unix-socket List answers in milliseconds; a wedged kubelet must not hold the sampler
RPC_TIMEOUT_SECONDS = 2.0
#: after failures, retry no more often than this (a failed RPC can cost the timeout)
MAX_BACKOFF_SECONDS = 300.0
_MAX_MESSAGE_BYTES = 32 * 1024 * 1024


class PodResourcesUnavailable(Exception):
    """The kubelet pod-resources socket is missing or the List call failed."""


@dataclass(frozen=True)
class PodDevice:
    """One GPU device id allocated to one container."""

    namespace: str
    pod: str
    container: str
    resource_name: str
    #: as the device plugin reported it: ``GPU-...``, ``GPU-...::2``, ``MIG-...``, ``3``, ...
    device_id: str
    #: how the container shares this GPU (agent/attribution/sharing.py)
    sharing: Sharing = NOT_SHARED


def is_gpu_resource(resource_name: str) -> bool:
    """nvidia.com/gpu, its time-sliced rename nvidia.com/gpu.shared, nvidia.com/mig-*, and
    Volcano's vGPUs (volcano.sh/vgpu-number)."""
    return resource_name in (
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "volcano.sh/vgpu-number",
    ) or (resource_name.startswith("nvidia.com/mig-"))


#: the NVIDIA DRA driver, as ResourceSlices, ResourceClaim results and the kubelet name it
NVIDIA_DRA_DRIVER = "gpu.nvidia.com"


def gpu_devices(response: api_pb2.ListPodResourcesResponse) -> list[PodDevice]:
    """Every GPU device id in a List response, one entry per (container, device id), with
    how the container shares it (its other resources: HAMi's, Volcano's): device-plugin
    GPUs, and GPUs allocated through a ResourceClaim (Dynamic Resource Allocation), whose
    id is the DRA driver's device name (``gpu-0``: devices.py)."""
    found: list[PodDevice] = []
    for pod in response.pod_resources:
        for container in pod.containers:
            resources: dict[str, list[str]] = {}
            for listed in container.devices:
                resources.setdefault(listed.resource_name, []).extend(listed.device_ids)
            for name, device_ids in resources.items():
                if not is_gpu_resource(name):
                    continue
                sharing = container_sharing(resources, name)
                found.extend(
                    PodDevice(pod.namespace, pod.name, container.name, name, device_id, sharing)
                    for device_id in device_ids
                )
    claimed = [
        PodDevice(pod.namespace, pod.name, container.name, claimed.driver_name, claimed.device_name)
        for pod in response.pod_resources
        for container in pod.containers
        for dynamic in container.dynamic_resources
        for claimed in dynamic.claim_resources
        if claimed.driver_name == NVIDIA_DRA_DRIVER and claimed.device_name
    ]
    return found + claimed


def shared_devices(on_gpu: list[PodDevice], mps_server: bool) -> list[PodDevice]:
    """The pod-resources devices of one GPU with their sharing completed: a plain device
    id that several pods list is time-sliced, and time-slicing where the MPS server runs
    (``mps_server``) is MPS."""
    several = len({(d.namespace, d.pod) for d in on_gpu}) > 1
    out = []
    for device in on_gpu:
        mode = device.sharing.mode
        if mode is None and several:
            mode = "time_slicing"
        if mode == "time_slicing" and mps_server:
            mode = "mps"
        if mode != device.sharing.mode:
            device = dataclasses.replace(device, sharing=Sharing(mode, device.sharing.share))
        out.append(device)
    return out


class PodResourcesClient:
    """The ``List`` call on one socket path; the channel is opened on first use."""

    def __init__(self, socket_path: Path, timeout_seconds: float = RPC_TIMEOUT_SECONDS) -> None:
        self.socket_path = socket_path
        self._timeout_seconds = timeout_seconds
        self._channel: grpc.Channel | None = None

    def list_gpu_devices(self) -> list[PodDevice]:
        """Raises PodResourcesUnavailable when the socket is absent or the RPC fails."""
        if not self.socket_path.exists():
            raise PodResourcesUnavailable(f"socket {self.socket_path} does not exist")
        # imported on first use: grpc and the stubs are ~14 MiB of resident memory, which
        # a node without a kubelet (Slurm, bare metal) never needs
        import grpc

        from agent.attribution.podresources import api_pb2, api_pb2_grpc

        if self._channel is None:
            # grpc reconnects to the same path after a kubelet restart recreates the socket
            self._channel = grpc.insecure_channel(
                f"unix://{self.socket_path.absolute()}",
                options=[("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES)],
            )
        stub = api_pb2_grpc.PodResourcesListerStub(self._channel)  # type: ignore[no-untyped-call]
        try:
            response = stub.List(api_pb2.ListPodResourcesRequest(), timeout=self._timeout_seconds)
        except grpc.RpcError as err:
            raise PodResourcesUnavailable(f"List failed: {_describe(err)}") from err
        return gpu_devices(response)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


def _describe(err: grpc.RpcError) -> str:
    import grpc  # already loaded: an RpcError came from it

    if isinstance(err, grpc.Call):
        return f"{err.code().name}: {err.details()}"
    return type(err).__name__


class PodResourcesCache:
    """The last List answer, refreshed lazily once ``refresh_seconds`` have passed.

    When the kubelet cannot be reached the cache is empty (attribution falls back to the
    other methods), the outage is logged once, and retries back off exponentially up to
    MAX_BACKOFF_SECONDS so a wedged kubelet costs at most one RPC timeout per backoff.
    A missing socket is cheap to detect and is checked every refresh period.
    """

    def __init__(
        self,
        client: PodResourcesClient,
        refresh_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        stats: AgentStats | None = None,
    ) -> None:
        self._client = client
        self._refresh_seconds = refresh_seconds
        self._monotonic = monotonic
        self._stats = stats
        self._devices: list[PodDevice] = []
        self._next_refresh: float | None = None
        self._failures = 0

    def devices(self) -> list[PodDevice]:
        now = self._monotonic()
        if self._next_refresh is None or now >= self._next_refresh:
            self._refresh(now)
        return self._devices

    def _refresh(self, now: float) -> None:
        try:
            self._devices = self._client.list_gpu_devices()
        except PodResourcesUnavailable as err:
            self._on_failure(now, err)
            return
        if self._failures:
            log.info("kubelet pod-resources reachable again at %s", self._client.socket_path)
        self._failures = 0
        self._next_refresh = now + self._refresh_seconds

    def _on_failure(self, now: float, err: PodResourcesUnavailable) -> None:
        missing = not self._client.socket_path.exists()
        if self._failures == 0:
            # a node without Kubernetes has no socket: worth a line, not a warning
            log.log(
                logging.INFO if missing else logging.WARNING,
                "kubelet pod-resources unavailable (%s); attributing GPUs from /proc, "
                "Slurm mapping files and manual labels until it answers",
                err,
            )
        self._failures += 1
        self._devices = []
        if self._stats is not None and not missing:
            self._stats.record_field_error("", "attribution_kubelet")
        backoff = 0.0 if missing else self._refresh_seconds * (2 ** min(self._failures - 1, 16))
        self._next_refresh = now + max(self._refresh_seconds, min(backoff, MAX_BACKOFF_SECONDS))

    def close(self) -> None:
        self._client.close()
