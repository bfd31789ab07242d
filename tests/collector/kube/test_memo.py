"""The enricher's memo per pod: a batch whose pods did not change is answered from it
(the very Workload objects it returned before), whatever else the cluster's watches
report; a change to the pod, its namespace's labels or an owner link is seen at once."""

from __future__ import annotations

import copy
from typing import Any

from agent.model import Workload
from collector.analysis.energy import workload_ref
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.kube.settings import KubeMetadataSettings
from collector.kube.store import NAMESPACE, POD, REPLICASET, MetadataStore
from tests.collector.kube.test_enrich import enriched, pod
from tests.fakes.kube_api import recorded_cluster

KEYS = keys_of(KubeMetadataSettings())
SERVE = "llm-serve-6d8f9c7b5-x2v7q"


def loaded() -> tuple[MetadataStore, dict[str, list[dict[str, Any]]]]:
    cluster = recorded_cluster()
    store = MetadataStore(KEYS, (), 1000, 1000)
    for resource in (POD, NAMESPACE, REPLICASET):
        store.replace(resource, cluster[resource])
    return store, cluster


def modified(obj: dict[str, Any], version: str, **labels: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = version
    obj["metadata"].setdefault("labels", {}).update(labels)
    return obj


def test_other_pods_events_and_owner_status_leave_the_memo_alone() -> None:
    store, cluster = loaded()
    enricher = WorkloadEnricher(KEYS, store)
    w = pod(SERVE)
    first = enriched(enricher, w)
    other = cluster[POD][1]
    for version in range(200_000, 200_050):  # a busy cluster: another pod, over and over
        store.apply(POD, "MODIFIED", modified(other, str(version)))
    # the ReplicaSet's status moves (same owner link): nothing any pod reads
    rs = copy.deepcopy(cluster[REPLICASET][0])
    rs["status"]["readyReplicas"] = 1
    store.apply(REPLICASET, "MODIFIED", modified(rs, "200100"))
    store.replace(POD, cluster[POD])  # a relist of the same objects
    assert enriched(enricher, w) is first


def test_a_change_to_the_pod_its_namespace_or_its_owners_is_seen() -> None:
    store, cluster = loaded()
    enricher = WorkloadEnricher(KEYS, store)
    w = pod(SERVE)
    assert workload_ref(enriched(enricher, w)).team == "llm-platform"
    store.apply(POD, "MODIFIED", modified(cluster[POD][0], "300000", team="serving"))
    assert workload_ref(enriched(enricher, w)).team == "serving"
    assert workload_ref(enriched(enricher, pod("nightly-eval-29310240-8kq4z"))).team == "eval"
    namespace = modified(cluster[NAMESPACE][0], "300001", team="inference")
    store.apply(NAMESPACE, "MODIFIED", namespace)
    unknown = pod("not-listed-yet")  # attributed from its labels and its namespace's
    assert workload_ref(enriched(enricher, unknown)).team == "inference"
    rs = copy.deepcopy(cluster[REPLICASET][0])
    rs["metadata"]["ownerReferences"][0]["name"] = "llm-serve-v2"
    store.apply(REPLICASET, "MODIFIED", modified(rs, "300002"))
    assert workload_ref(enriched(enricher, w)).owner == "Deployment/ml/llm-serve-v2"
    store.apply(POD, "DELETED", cluster[POD][0])
    gone = enriched(enricher, Workload(**{**_fields(w), "labels": {"team": "from-labels"}}))
    assert workload_ref(gone).team == "from-labels"


def _fields(w: Workload) -> dict[str, Any]:
    return {f: getattr(w, f) for f in w.__struct_fields__}
