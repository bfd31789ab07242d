"""What the collector keeps of the cluster: pods, namespaces and the owner links of
ReplicaSets, Jobs, StatefulSets and DaemonSets, as the watches (collector/kube/watcher.py)
last saw them.

Only what attribution needs is kept (the labels and annotations in ``keep``, the
controller ownerReference, the priority class), and at most ``max_pods`` pods and
``max_owners`` owner links: past a bound a new object is counted in ``dropped``, not kept.
Thread-safe: the watch threads write, ingest reads.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from collector.kube.claims import CLAIM, SLICE, ClaimBook, PodName
from collector.kube.owners import NO_MARKS, Attribution, Keys, Marks, PodFacts, Ref, attribute

#: the resources watched, each with where its objects go
POD, NAMESPACE, REPLICASET, JOB = "pods", "namespaces", "replicasets", "jobs"
#: a Kubeflow Notebook's pod is its StatefulSet's; a DaemonSet may have an owner too
STATEFULSET, DAEMONSET = "statefulsets", "daemonsets"
OWNER_KINDS = {
    REPLICASET: "ReplicaSet", JOB: "Job", STATEFULSET: "StatefulSet", DAEMONSET: "DaemonSet",
}  # fmt: skip
#: the (uid, resourceVersion) of a pod not held
NO_VERSION = ("", "")


class MetadataStore:
    def __init__(self, keys: Keys, keep: Collection[str], max_pods: int, max_owners: int) -> None:
        self.keys = keys
        self._keep = frozenset(keep) | set(keys.team) | set(keys.user) | set(keys.queue)
        self._max = {POD: max_pods, **dict.fromkeys(OWNER_KINDS, max_owners)}
        self._lock = threading.Lock()
        self._pods: dict[tuple[str, str], PodFacts] = {}
        self._namespaces: dict[str, Marks] = {}
        #: (kind, namespace, name) -> its controller
        self._parents: dict[tuple[str, str, str], Ref | None] = {}
        #: objects not kept because a bound was reached, by resource
        self.dropped: dict[str, int] = dict.fromkeys(self._max, 0)
        #: DRA: which pods a ResourceClaim gave each GPU (collector/kube/claims.py)
        self._claims = ClaimBook(max_pods)
        #: each pod's (uid, resourceVersion): with ``links``, the enricher's memo key
        self._versions: dict[tuple[str, str], tuple[str, str]] = {}
        #: bumped when what every pod's attribution may read changes (a namespace's kept
        #: labels, an owner link), not by a pod's events nor by a ReplicaSet's status
        self.links = 0

    def replace(self, resource: str, objects: Iterable[Mapping[str, Any]]) -> None:
        """A fresh list of ``resource``: everything of it held before is forgotten."""
        with self._lock:
            if resource in (CLAIM, SLICE):
                self._claims.replace(resource, objects)
                return
            before = (dict(self._namespaces), dict(self._parents))
            if resource == POD:
                self._pods.clear()
                self._versions.clear()
            elif resource == NAMESPACE:
                self._namespaces.clear()
            else:
                kind = OWNER_KINDS[resource]
                self._parents = {k: v for k, v in self._parents.items() if k[0] != kind}
            for obj in objects:
                self._put(resource, obj)
            if before != (self._namespaces, self._parents):
                self.links += 1

    def apply(self, resource: str, event: str, obj: Mapping[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED) of ``resource``."""
        with self._lock:
            if resource in (CLAIM, SLICE):
                self._claims.apply(resource, event, obj)
            elif event == "DELETED":
                self._delete(resource, obj)
            else:
                self._put(resource, obj)

    def stamp(self, namespace: str, name: str) -> tuple[str, str, int]:
        """What the pod's attribution depends on: its (uid, resourceVersion), ("", "")
        while unknown, and ``links``. Equal stamps, equal attributions. Without the lock:
        one dict read, atomic, on the ingest path's every pod."""
        uid, version = self._versions.get((namespace, name), NO_VERSION)
        return uid, version, self.links

    def attribution(self, namespace: str, name: str) -> Attribution | None:
        """The pod's attribution, None when the pod is not known."""
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return None
            return attribute(pod, self.namespace(namespace), self._parent_of, self.keys)

    def pod_labels(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The pod's labels the store keeps (``keep`` and the team/user/queue keys), None
        when the pod is not known."""
        pod = self._pods.get((namespace, name))
        return pod.marks.labels if pod is not None else None

    def claim_holders(self, gpu_uuid: str) -> tuple[PodName, ...]:
        """The pods a ResourceClaim allocated ``gpu_uuid`` to (DRA), () when none."""
        with self._lock:
            return self._claims.holders(gpu_uuid) if len(self._claims) else ()

    @property
    def claims_dropped(self) -> int:
        """ResourceClaims and ResourceSlices not kept: past the bound (``max_pods``)."""
        return self._claims.dropped

    def namespace(self, name: str) -> Marks:
        return self._namespaces.get(name, NO_MARKS)

    def counts(self) -> dict[str, int]:
        """Objects held, by resource."""
        with self._lock:
            kinds = [k[0] for k in self._parents]
            owners = {r: kinds.count(kind) for r, kind in OWNER_KINDS.items()}
            return {POD: len(self._pods), NAMESPACE: len(self._namespaces), **owners}

    def _parent_of(self, kind: str, namespace: str, name: str) -> Ref | None:
        return self._parents.get((kind, namespace, name))

    def _put(self, resource: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if resource == NAMESPACE:
            marks = self._marks(meta)
            self._changed(self._namespaces.get(name) != marks)
            self._namespaces[name] = marks
            return
        if resource == POD:
            if (ns, name) not in self._pods and self._full(POD, len(self._pods)):
                return
            spec = obj.get("spec") or {}
            self._pods[(ns, name)] = PodFacts(
                ns, name, self._marks(meta), controller(meta), spec.get("priorityClassName", "")
            )
            self._versions[(ns, name)] = (
                str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
            )  # fmt: skip
            return
        key = (OWNER_KINDS[resource], ns, name)
        if key not in self._parents and self._full(resource, len(self._parents)):
            return
        parent = controller(meta)
        self._changed(key not in self._parents or self._parents[key] != parent)
        self._parents[key] = parent

    def _changed(self, changed: bool) -> None:
        """A namespace's marks or an owner link changed: every memoised attribution may."""
        if changed:
            self.links += 1

    def _full(self, resource: str, held: int) -> bool:
        if held < self._max[resource]:
            return False
        self.dropped[resource] += 1
        return True

    def _delete(self, resource: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if resource == POD:
            self._pods.pop((ns, name), None)
            self._versions.pop((ns, name), None)
        elif resource == NAMESPACE:
            self._changed(self._namespaces.pop(name, None) is not None)
        else:
            key = (OWNER_KINDS[resource], ns, name)
            self._changed(key in self._parents)
            self._parents.pop(key, None)

    def _marks(self, meta: Mapping[str, Any]) -> Marks:
        keep = self._keep
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        return Marks(
            {k: str(v) for k, v in labels.items() if k in keep},
            {k: str(v) for k, v in annotations.items() if k in keep},
        )


def controller(meta: Mapping[str, Any]) -> Ref | None:
    """The object's controller ownerReference as (kind, name), None without one."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") and ref.get("name"):
            return (str(ref["kind"]), str(ref["name"]))
    return None
