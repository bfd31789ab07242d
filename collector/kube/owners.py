"""Who a pod belongs to: its owner chain, team, user, queue and priority class.

Pure functions over plain facts, the one resolution both paths share: pod metadata read
from the API server (collector/kube/store.py) and, without API access, the labels an
agent or the simulator sends on a pod's ``Workload`` (``facts_of_labels``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from collector.records import PRIORITY_CLASS_LABEL

#: an ownerReference as (kind, name); the namespace is the pod's
Ref = tuple[str, str]
#: (kind, namespace, name) -> that object's controller ownerReference, None when unknown
ParentOf = Callable[[str, str, str], Ref | None]

#: the chain is cut here: owners are a few levels deep (Pod, ReplicaSet, Deployment)
MAX_CHAIN = 6

#: Workload.labels keys naming a pod's owners, OpenTelemetry's k8s resource attributes
#: (``k8s.deployment.name`` ...) spelt as label names, bottom of the chain first; a
#: custom owner (Kubeflow Notebook, RayCluster, PyTorchJob) is ``k8s_owner_kind`` and
#: ``k8s_owner_name`` and sits on top
OWNER_LABELS: tuple[Ref, ...] = (
    ("ReplicaSet", "k8s_replicaset_name"),
    ("Deployment", "k8s_deployment_name"),
    ("Job", "k8s_job_name"),
    ("CronJob", "k8s_cronjob_name"),
    ("StatefulSet", "k8s_statefulset_name"),
    ("DaemonSet", "k8s_daemonset_name"),
)
CUSTOM_KIND_LABEL, CUSTOM_NAME_LABEL = "k8s_owner_kind", "k8s_owner_name"


@dataclass(frozen=True, slots=True)
class Keys:
    """Which label/annotation keys name a team, a user and a queue, first found wins."""

    team: tuple[str, ...]
    user: tuple[str, ...]
    queue: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Marks:
    """An object's labels and annotations."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    def first(self, keys: Sequence[str]) -> str:
        """The value of the first of ``keys`` set (labels before annotations), else ""."""
        for key in keys:
            value = self.labels.get(key) or self.annotations.get(key)
            if value:
                return value
        return ""


NO_MARKS = Marks({}, {})


@dataclass(frozen=True, slots=True)
class PodFacts:
    namespace: str
    name: str
    marks: Marks
    #: the pod's controller ownerReference; None for a bare pod
    owner: Ref | None = None
    priority_class: str = ""


@dataclass(frozen=True, slots=True)
class Attribution:
    team: str
    user: str
    #: the owner chain, the pod's own controller first, its top last; empty: a bare pod
    chain: tuple[Ref, ...]
    namespace: str
    queue: str = ""
    priority_class: str = ""

    @property
    def owner(self) -> str:
        """The top of the chain as ``Kind/namespace/name`` ("Deployment/ml/llm-serve");
        "" for a bare pod."""
        if not self.chain:
            return ""
        kind, name = self.chain[-1]
        return f"{kind}/{self.namespace}/{name}"


def owner_chain(pod: PodFacts, parent_of: ParentOf) -> tuple[Ref, ...]:
    """The pod's owners bottom up: its controller, then each one's controller as far as
    ``parent_of`` knows (ReplicaSet -> Deployment, Job -> CronJob); cut at MAX_CHAIN."""
    chain: list[Ref] = []
    ref = pod.owner
    while ref is not None and len(chain) < MAX_CHAIN and ref not in chain:
        chain.append(ref)
        ref = parent_of(ref[0], pod.namespace, ref[1])
    return tuple(chain)


def attribute(pod: PodFacts, namespace: Marks, parent_of: ParentOf, keys: Keys) -> Attribution:
    """The pod's attribution: team and user from its own labels and annotations (in
    ``keys`` order), else its namespace's; the queue from the pod's."""
    return Attribution(
        team=pod.marks.first(keys.team) or namespace.first(keys.team),
        user=pod.marks.first(keys.user) or namespace.first(keys.user),
        chain=owner_chain(pod, parent_of),
        namespace=pod.namespace,
        queue=pod.marks.first(keys.queue),
        priority_class=pod.priority_class,
    )


def facts_of_labels(namespace: str, name: str, labels: Mapping[str, str]) -> PodFacts:
    """A pod's facts from the labels its ``Workload`` carries: owner names as
    OWNER_LABELS (and a custom owner) name them, priority class from its label."""
    chain = _label_chain(labels)
    return PodFacts(
        namespace=namespace,
        name=name,
        marks=Marks(labels, {}),
        owner=chain[0] if chain else None,
        priority_class=labels.get(PRIORITY_CLASS_LABEL, ""),
    )


def label_parents(labels: Mapping[str, str]) -> ParentOf:
    """``parent_of`` for a chain named by labels: each owner's parent is the next."""
    chain = _label_chain(labels)

    def parent_of(kind: str, _namespace: str, name: str) -> Ref | None:
        at = chain.index((kind, name)) if (kind, name) in chain else -1
        return chain[at + 1] if 0 <= at < len(chain) - 1 else None

    return parent_of


def _label_chain(labels: Mapping[str, str]) -> list[Ref]:
    chain = [(kind, labels[key]) for kind, key in OWNER_LABELS if labels.get(key)]
    kind, name = labels.get(CUSTOM_KIND_LABEL), labels.get(CUSTOM_NAME_LABEL)
    if kind and name:
        chain.append((kind, name))
    return chain
