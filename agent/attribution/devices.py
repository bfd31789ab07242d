"""Device names as schedulers write them, resolved to the GPU UUIDs our samples carry.

Device plugins, kubelet and Slurm prologs name a GPU in several ways:

- ``GPU-<uuid>`` and ``MIG-<uuid>`` (NVIDIA device plugin, jobstats ``/run/gpustat``);
- ``GPU-<uuid>::3`` (time-slicing replicas; EKS also suffixes MIG ids) -- the suffix is dropped;
- ``MIG-GPU-<uuid>/<gi>/<ci>`` (device plugins before MIG UUIDs existed, driver < 470);
- ``3`` (``deviceIDStrategy=index``, jobstats and dcgm-exporter mapping files);
- ``3.1`` (mapping files: GPU index 3, GPU instance 1);
- ``nvidia3``, ``nvidia3/vgpu0``, ``nvidia3/gi1[/vgpu0]`` (GKE's device plugin);
- ``gpu-3`` (NVIDIA's DRA driver, a ResourceClaim's device as the kubelet reports it).
  The driver numbers a GPU by its device minor (``/dev/nvidia3``), GKE's plugin too;
  both are read as the NVML index, which they equal where minors follow PCI order (the
  driver's default). Its MIG devices (``gpu-3-mig-9-4-4``: profile, placement) name no
  GPU instance id, so they resolve to nothing rather than to a guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent.model import GpuInfo

_OLD_MIG = re.compile(r"^MIG-(GPU-[0-9A-Fa-f-]+)/([0-9]+)/([0-9]+)$")
_INDEX = re.compile(r"^([0-9]+)(?:\.([0-9]+))?$")
_GKE = re.compile(r"^nvidia([0-9]+)(?:/gi([0-9]+))?(?:/vgpu[0-9]+)?$")
_DRA = re.compile(r"^gpu-([0-9]+)()$")  # the empty group 2: no GPU instance


@dataclass(frozen=True)
class DeviceRef:
    """A GPU named by UUID or by index, optionally narrowed to one MIG GPU instance."""

    uuid: str | None = None
    index: int | None = None
    gpu_instance_id: int | None = None


def parse_device_id(device_id: str) -> DeviceRef | None:
    """A DeviceRef for any of the forms in the module docstring; None for anything else."""
    name = device_id.strip().split("::", 1)[0]
    old_mig = _OLD_MIG.match(name)
    if old_mig:
        return DeviceRef(uuid=old_mig.group(1), gpu_instance_id=int(old_mig.group(2)))
    if name.startswith(("GPU-", "MIG-")):
        return DeviceRef(uuid=name)
    numbered = _INDEX.match(name) or _GKE.match(name) or _DRA.match(name)
    if numbered:
        gi = numbered.group(2)
        return DeviceRef(index=int(numbered.group(1)), gpu_instance_id=int(gi) if gi else None)
    return None


def gpu_instance_id(info: GpuInfo) -> int | None:
    """The MIG GPU-instance id of a MIG GpuInfo, where the source reports one.

    Read by name because ``GpuInfo.mig_gpu_instance_id`` is a proposed field: until the
    wire contract carries it, references that need it (``MIG-GPU-<uuid>/<gi>/<ci>``,
    ``<index>.<gi>``) resolve to nothing rather than to a guess.
    """
    value = getattr(info, "mig_gpu_instance_id", None)
    return value if isinstance(value, int) else None


class GpuDirectory:
    """The node's GPUs and MIG instances of one read, looked up by the ways they are named."""

    def __init__(self, gpus: Sequence[GpuInfo]) -> None:
        self._by_uuid = {info.uuid: info for info in gpus}
        self._physical_by_index = {
            info.index: info for info in gpus if info.mig_parent_uuid is None
        }
        self._mig_by_parent_gi: dict[tuple[str, int], GpuInfo] = {}
        for info in gpus:
            gi = gpu_instance_id(info)
            if info.mig_parent_uuid is not None and gi is not None:
                self._mig_by_parent_gi[(info.mig_parent_uuid, gi)] = info

    def info(self, uuid: str) -> GpuInfo | None:
        return self._by_uuid.get(uuid)

    def physical_index(self, uuid: str) -> int | None:
        """The index of a GPU, or of a MIG instance's parent GPU."""
        info = self._by_uuid.get(uuid)
        if info is not None and info.mig_parent_uuid is not None:
            info = self._by_uuid.get(info.mig_parent_uuid)
        return info.index if info is not None else None

    def resolve(self, ref: DeviceRef) -> str | None:
        """The UUID the samples use for ``ref``; None when no GPU of this read matches.

        A bare UUID resolves to itself even when this read does not list it: the sample
        for that GPU, if any, carries the same string.
        """
        parent_uuid = ref.uuid
        if parent_uuid is None and ref.index is not None:
            physical = self._physical_by_index.get(ref.index)
            parent_uuid = physical.uuid if physical is not None else None
        if parent_uuid is None:
            return None
        if ref.gpu_instance_id is None:
            return parent_uuid
        mig = self._mig_by_parent_gi.get((parent_uuid, ref.gpu_instance_id))
        return mig.uuid if mig is not None else None

    def resolve_id(self, device_id: str) -> str | None:
        ref = parse_device_id(device_id)
        return self.resolve(ref) if ref is not None else None
