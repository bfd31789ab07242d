"""Which pod holds a GPU allocated through Dynamic Resource Allocation, from the API
server's ResourceClaims and ResourceSlices (resource.k8s.io v1, or v1beta1).

A claim's ``status.allocation.devices.results`` name each allocated device as (driver,
pool, device), ``status.reservedFor`` the pods using it; the driver's ResourceSlices
describe each device of a pool, with NVIDIA's driver (``gpu.nvidia.com``) publishing the
GPU's ``uuid`` attribute. Together: GPU uuid -> the pods holding it. Plain dicts in,
plain tuples out; the store (collector/kube/store.py) guards it with its lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CLAIM, SLICE = "resourceclaims", "resourceslices"
NVIDIA_DRIVER = "gpu.nvidia.com"
#: (driver, pool, device name)
Device = tuple[str, str, str]
#: (namespace, pod name)
PodName = tuple[str, str]


class ClaimBook:
    """Claims and slices, at most ``max_objects`` of each: past it a new one is counted
    in ``dropped``, not kept."""

    def __init__(self, max_objects: int) -> None:
        self._max = max_objects
        self.dropped = 0
        #: (namespace, claim name) -> (its allocated devices, the pods it is reserved for)
        self._claims: dict[PodName, tuple[tuple[Device, ...], tuple[str, ...]]] = {}
        #: slice name -> {device: GPU uuid}
        self._slices: dict[str, dict[Device, str]] = {}
        self._holders: dict[str, tuple[PodName, ...]] | None = None

    def replace(self, resource: str, objects: Iterable[Mapping[str, Any]]) -> None:
        (self._claims if resource == CLAIM else self._slices).clear()
        self._holders = None
        for obj in objects:
            self.apply(resource, "ADDED", obj)

    def apply(self, resource: str, event: str, obj: Mapping[str, Any]) -> None:
        self._holders = None
        meta = obj.get("metadata") or {}
        if resource == CLAIM:
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if event == "DELETED":
                self._claims.pop(key, None)
            elif self._room(key in self._claims, len(self._claims)):
                self._claims[key] = (allocated(obj), reserved_pods(obj))
            return
        name = str(meta.get("name", ""))
        if event == "DELETED":
            self._slices.pop(name, None)
        elif self._room(name in self._slices, len(self._slices)):
            self._slices[name] = slice_uuids(obj)

    def _room(self, known: bool, held: int) -> bool:
        if known or held < self._max:
            return True
        self.dropped += 1
        return False

    def holders(self, gpu_uuid: str) -> tuple[PodName, ...]:
        """The pods a claim allocated ``gpu_uuid`` to, () when none."""
        if self._holders is None:
            self._holders = self._index()
        return self._holders.get(gpu_uuid, ())

    def __len__(self) -> int:
        return len(self._claims)

    def _index(self) -> dict[str, tuple[PodName, ...]]:
        uuids = {device: uuid for part in self._slices.values() for device, uuid in part.items()}
        out: dict[str, tuple[PodName, ...]] = {}
        for (namespace, _), (devices, pods) in sorted(self._claims.items()):
            for device in devices:
                uuid = uuids.get(device)
                if uuid is not None:
                    out[uuid] = (*out.get(uuid, ()), *((namespace, p) for p in pods))
        return out


def allocated(claim: Mapping[str, Any]) -> tuple[Device, ...]:
    """The NVIDIA GPUs a claim was allocated (same shape in v1 and v1beta1)."""
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
    return tuple(
        (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
        for r in results
        if r.get("driver") == NVIDIA_DRIVER
    )


def reserved_pods(claim: Mapping[str, Any]) -> tuple[str, ...]:
    reserved = (claim.get("status") or {}).get("reservedFor") or ()
    return tuple(str(r["name"]) for r in reserved if r.get("resource") == "pods" and r.get("name"))


def slice_uuids(resource_slice: Mapping[str, Any]) -> dict[Device, str]:
    """{(driver, pool, device): GPU uuid} of an NVIDIA ResourceSlice; a device's attributes
    are ``devices[].attributes`` in v1 and ``devices[].basic.attributes`` in v1beta1."""
    spec = resource_slice.get("spec") or {}
    driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name", "")
    if driver != NVIDIA_DRIVER:
        return {}
    out = {}
    for device in spec.get("devices") or ():
        attributes = device.get("attributes") or (device.get("basic") or {}).get("attributes")
        uuid = ((attributes or {}).get("uuid") or {}).get("string")
        if uuid and device.get("name"):
            out[(driver, str(pool), str(device["name"]))] = str(uuid)
    return out
