"""Pod workloads enriched at ingest with who they belong to: team, user, owner, queue.

For each pod ``Workload`` of a batch, the attribution (collector/kube/owners.py) comes from
the API server's metadata where the collector reads it (a MetadataStore), else from the
labels the agent sent on the workload. What the agent set itself (``Workload.team`` and
``user``: ``attribution.manual``, a scheduler) wins. The owner, queue and priority class
travel as labels (OWNER_LABEL ...), read into ``WorkloadRef.owner`` by
``analysis.energy.workload_ref``. Results are memoised per workload key until the store
changes for its pod (its uid and resourceVersion, and the store's ``links``: a
namespace's labels or an owner link), not on every watch event of the cluster, so a
batch whose pods did not change costs a dict lookup per workload (bench/kube_enrich.py).
"""

from __future__ import annotations

import msgspec

from agent.model import Batch, GpuSample, Workload, WorkloadKind
from collector.kube.labels import PodMetricLabels
from collector.kube.owners import (
    NO_MARKS,
    Attribution,
    Keys,
    attribute,
    facts_of_labels,
    label_parents,
)
from collector.kube.settings import KubeMetadataSettings
from collector.kube.store import MetadataStore
from collector.records import OWNER_LABEL, PRIORITY_CLASS_LABEL, QUEUE_LABEL

#: memoised workloads past which the memo starts afresh (pods come and go)
MEMO_LIMIT = 200_000
#: MetadataStore.stamp of the pod when memoised; None without a store
Stamp = tuple[str, str, int] | None


def keys_of(settings: KubeMetadataSettings) -> Keys:
    return Keys(tuple(settings.team_keys), tuple(settings.user_keys), tuple(settings.queue_keys))


class WorkloadEnricher:
    """``enricher(batch)``: the batch with its pod workloads attributed."""

    def __init__(
        self,
        keys: Keys,
        store: MetadataStore | None = None,
        pod_labels: PodMetricLabels | None = None,
    ) -> None:
        """``pod_labels``: where each pod's allowlisted labels are recorded for
        gpufleet_workload_info (from the store's pod, else the labels the agent sent)."""
        self.keys = keys
        self.store = store
        self.pod_labels = pod_labels if pod_labels is not None else PodMetricLabels(())
        self._memo: dict[str, tuple[Workload, Stamp, Workload]] = {}

    def __call__(self, batch: Batch) -> Batch:
        samples: list[GpuSample] = []
        changed = False
        for sample in batch.samples:
            held = sample.workloads
            if held:
                enriched = tuple(self.workload(w) for w in held)
                if any(a is not b for a, b in zip(enriched, held, strict=True)):
                    sample = msgspec.structs.replace(sample, workloads=enriched)
                    changed = True
            elif claimed := self.claimed(sample.gpu_uuid):  # a ResourceClaim says whom
                enriched = tuple(self.workload(w) for w in claimed)
                sample = msgspec.structs.replace(sample, workloads=enriched)
                changed = True
            samples.append(sample)
        return msgspec.structs.replace(batch, samples=tuple(samples)) if changed else batch

    def claimed(self, gpu_uuid: str) -> tuple[Workload, ...]:
        """The pods a ResourceClaim allocated this GPU to, for a sample whose agent named
        no holder (DRA without the kubelet's dynamic resources): held, not unallocated."""
        if self.store is None:
            return ()
        return tuple(
            Workload(kind=WorkloadKind.KUBERNETES_POD, id=f"{ns}/{name}", name=name, namespace=ns)
            for ns, name in self.store.claim_holders(gpu_uuid)
        )

    def workload(self, w: Workload) -> Workload:
        if w.kind is not WorkloadKind.KUBERNETES_POD:
            return w
        store = self.store
        stamp = store.stamp(w.namespace or "", w.name or w.id) if store is not None else None
        memo = self._memo.get(w.key)
        if memo is not None and memo[1] == stamp and memo[0] == w:
            return memo[2]
        enriched = enrich(w, self.attribution(w))
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
            self.pod_labels.clear()  # recorded again with each pod's next enrichment
        self._memo[w.key] = (w, stamp, enriched)
        self._record_labels(w)
        return enriched

    def _record_labels(self, w: Workload) -> None:
        if not self.pod_labels.keys:
            return
        namespace, name = w.namespace or "", w.name or w.id
        known = self.store.pod_labels(namespace, name) if self.store is not None else None
        self.pod_labels.record(w.key, known if known is not None else w.labels)

    def attribution(self, w: Workload) -> Attribution:
        """From the API server's metadata where the pod is known, else from its labels
        (and its namespace's, where the API server told them)."""
        namespace, name = w.namespace or "", w.name or w.id
        store = self.store
        if store is not None and (found := store.attribution(namespace, name)) is not None:
            return found
        facts = facts_of_labels(namespace, name, w.labels)
        ns_marks = store.namespace(namespace) if store is not None else NO_MARKS
        return attribute(facts, ns_marks, label_parents(w.labels), self.keys)


def enrich(w: Workload, found: Attribution) -> Workload:
    """``w`` with ``found``'s team and user where it has none, and its owner, queue and
    priority class as labels; ``w`` itself when that adds nothing."""
    labels = dict(w.labels)
    if found.owner:
        labels[OWNER_LABEL] = found.owner
    if found.queue:
        labels[QUEUE_LABEL] = found.queue
    if found.priority_class:
        labels[PRIORITY_CLASS_LABEL] = found.priority_class
    team, user = w.team or found.team or None, w.user or found.user or None
    if labels == w.labels and team == w.team and user == w.user:
        return w
    return msgspec.structs.replace(w, team=team, user=user, labels=labels)
