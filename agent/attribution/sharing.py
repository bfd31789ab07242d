"""How a container shares its GPUs, from the resource names the kubelet lists for it. Pure.

pod-resources ``List`` names, per container, each resource with its device ids; a counted
resource (HAMi's ``nvidia.com/gpucores: 30``) is listed as one id per unit, so its quantity
is the number of ids. The modes (``agent.model.GPU_SHARING_MODES``):

- ``hami``: the container asks for ``nvidia.com/gpumem``, ``nvidia.com/gpucores`` or
  ``nvidia.com/gpumem-percentage`` beside ``nvidia.com/gpu``; ``gpucores`` is its declared
  share of each GPU it holds (percent of the GPU's SMs);
- ``volcano``: Volcano's vGPU device plugin, ``volcano.sh/vgpu-number`` (the GPUs) with
  ``volcano.sh/vgpu-memory`` and ``volcano.sh/vgpu-cores`` (the declared share, percent);
- ``time_slicing``: the device plugin's renamed resource ``nvidia.com/gpu.shared``, its
  replicas (``nvidia.com/gpu`` device ids with a ``::N`` suffix), or a plain device id
  that several pods list (kubelet.py's ``shared_devices``);
- ``mps``: the same replicas on a GPU where the MPS server runs (NVML lists the
  ``nvidia-cuda-mps-server`` process on it): the NVIDIA device plugin's MPS sharing hands
  out replicas named exactly like time-slicing's, so the server is what tells them apart.

Time-slicing and MPS declare no share; the collector splits their GPU's price equally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HAMI_RESOURCES = ("nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage")
VOLCANO_RESOURCES = ("volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
#: the resource whose quantity (percent of a GPU's SMs) is a declared share, per mode
_CORES = {"hami": "nvidia.com/gpucores", "volcano": "volcano.sh/vgpu-cores"}
TIME_SLICED_RESOURCE = "nvidia.com/gpu.shared"
#: the process NVML lists on a GPU that MPS shares (its clients run through it)
MPS_SERVER_PROCESS = "nvidia-cuda-mps-server"


@dataclass(frozen=True)
class Sharing:
    """How one container holds its GPUs: the mode (None: not known to be shared) and
    the declared share of each GPU (0..1; None: none declared)."""

    mode: str | None = None
    share: float | None = None


NOT_SHARED = Sharing()


def container_sharing(resources: Mapping[str, Sequence[str]], gpu_resource: str) -> Sharing:
    """The sharing of a container listing ``resources`` (name -> device ids) for its
    devices of ``gpu_resource``."""
    mode = _mode(resources, gpu_resource)
    if mode is None:
        return NOT_SHARED
    cores = _CORES.get(mode)
    units = len(resources.get(cores, ())) if cores is not None else 0
    return Sharing(mode, min(1.0, units / 100.0) if units else None)


def _mode(resources: Mapping[str, Sequence[str]], gpu_resource: str) -> str | None:
    if any(name in resources for name in HAMI_RESOURCES):
        return "hami"
    if gpu_resource == "volcano.sh/vgpu-number" or any(
        name in resources for name in VOLCANO_RESOURCES
    ):
        return "volcano"
    if gpu_resource == TIME_SLICED_RESOURCE:
        return "time_slicing"
    if gpu_resource == "nvidia.com/gpu" and any("::" in d for d in resources[gpu_resource]):
        return "time_slicing"
    return None
