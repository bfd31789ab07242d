"""The ``kubernetes`` settings section: where the collector reads pod metadata from, and
which labels and annotations name a pod's team, user and queue.

Off by default: without it the collector attributes pods from what the agents send (a
pod's ``Workload.labels``), through the same resolution (collector/kube/owners.py).

Least privilege (read-only RBAC the chart grants when it is on):
  ""     pods, namespaces   get, list, watch
  apps   replicasets, statefulsets, daemonsets  get, list, watch
  batch  jobs               get, list, watch
  resource.k8s.io  resourceclaims, resourceslices  get, list, watch  (DRA, where served)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from collector.actions.settings import KubernetesSettings
from collector.kube.labels import check_pod_labels
from gpufleet.settings import ConfigError

#: the attributes kubernetes.metric_labels may name (catalogue.WORKLOAD_INFO_LABELS)
METRIC_LABELS = ("team", "user", "owner_kind", "owner_name", "queue", "priority_class")


@dataclass(frozen=True)
class KubeMetadataSettings:
    enabled: bool = False
    #: API server URL; empty = the kubeconfig, else the pod's service account (in-cluster)
    host: str = ""
    kubeconfig: Path | None = None
    token_file: Path | None = None
    ca_file: Path | None = None
    verify_tls: bool = True
    #: pod label or annotation keys naming its team, first found wins; then the namespace's
    team_keys: list[str] = field(
        default_factory=lambda: ["team", "gpufleet.io/team", "app.kubernetes.io/part-of"]
    )
    #: pod label or annotation keys naming its user, first found wins; then the namespace's
    user_keys: list[str] = field(
        default_factory=lambda: ["gpufleet.io/owner", "notebooks.kubeflow.org/creator", "user"]
    )
    #: pod label or annotation keys naming its scheduler queue (Kueue, Volcano)
    queue_keys: list[str] = field(
        default_factory=lambda: ["kueue.x-k8s.io/queue-name", "volcano.sh/queue-name"]
    )
    #: which of a workload's attributes label its ``gpufleet_workload_info`` series (of
    #: team, user, owner_kind, owner_name, queue, priority_class; the rest stay empty, so
    #: absent): few, as Mimir refuses series with more than 30 labels
    metric_labels: list[str] = field(default_factory=lambda: ["team", "owner_kind", "owner_name"])
    #: pod label keys (``app``, ``app.kubernetes.io/name``, ``cost-center``) whose values
    #: label ``gpufleet_workload_info`` as ``label_<key>`` (collector/kube/labels.py), at
    #: most 16; never the full label set. From the API server's pod, else the agent's labels
    pod_labels: list[str] = field(default_factory=list)
    #: pods kept in memory (~1 KiB each); past it new pods are counted and not kept
    max_pods: int = 100_000
    #: ReplicaSets, Jobs, StatefulSets and DaemonSets kept (their owner link only); past
    #: it counted and not kept
    max_owners: int = 100_000
    #: a watch is reopened after this long (the server ends it anyway, typically 5-10 min)
    watch_timeout_seconds: int = 300
    #: reconnect backoff after a failure: doubles from the first to the most
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 60.0

    def __post_init__(self) -> None:
        for key in ("max_pods", "max_owners", "watch_timeout_seconds"):
            if getattr(self, key) < 1:
                raise ConfigError(f"kubernetes.{key}: must be >= 1, got {getattr(self, key)}")
        if not 0 < self.backoff_initial_seconds <= self.backoff_max_seconds:
            raise ConfigError(
                "kubernetes.backoff_initial_seconds: must be > 0 and at most "
                f"kubernetes.backoff_max_seconds ({self.backoff_max_seconds}), "
                f"got {self.backoff_initial_seconds}"
            )
        check_pod_labels(self.pod_labels)
        unknown = sorted(set(self.metric_labels) - set(METRIC_LABELS))
        if unknown:
            raise ConfigError(
                f"kubernetes.metric_labels: each must be one of {', '.join(METRIC_LABELS)}, "
                f"got {unknown}"
            )

    def connection(self) -> KubernetesSettings:
        """The API connection in the shape the actions' client builder takes."""
        return KubernetesSettings(
            enabled=self.enabled,
            host=self.host,
            kubeconfig=self.kubeconfig,
            token_file=self.token_file,
            ca_file=self.ca_file,
            verify_tls=self.verify_tls,
        )
