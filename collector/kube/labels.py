"""Pod labels on ``gpufleet_workload_info``: the allowlist ``kubernetes.pod_labels``.

dcgm-exporter's most asked-for feature is pod labels on its series; the whole label set
would make every pod a different, unbounded series shape, so only the allowlisted keys
travel, each as kube-state-metrics names them on ``kube_pod_labels``: ``label_`` and the
key with every character outside ``[a-zA-Z0-9_]`` made ``_`` (``app.kubernetes.io/name``
-> ``label_app_kubernetes_io_name``). At most MAX_POD_LABELS keys, each value cut to
MAX_VALUE_CHARS: Mimir refuses a series with more than 30 labels, and
gpufleet_workload_info has 8 of its own plus ``__name__``, ``job`` and ``instance``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from collector.kube.store import MetadataStore
from gpufleet.settings import ConfigError

#: 8 labels of the series' own + 3 Prometheus adds + 16 = 27 < 30, 3 left for external ones
MAX_POD_LABELS = 16
#: a longer value is cut (Prometheus takes any length; dashboards and Mimir's 2048 less)
MAX_VALUE_CHARS = 128
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")
#: a pod workload's key: ``pod:<namespace>/<name>`` (agent.model.Workload.key)
POD_KEY = "pod:"


def metric_label_name(key: str) -> str:
    """The Prometheus label name of pod label ``key``, as kube-state-metrics spells it."""
    return "label_" + _NOT_NAME.sub("_", key)


def check_pod_labels(keys: Sequence[str]) -> None:
    """ConfigError naming ``kubernetes.pod_labels`` when there are too many keys, an empty
    one, or two that become the same label name."""
    if len(keys) > MAX_POD_LABELS:
        raise ConfigError(
            f"kubernetes.pod_labels: at most {MAX_POD_LABELS} keys (Mimir refuses series with "
            f"more than 30 labels), got {len(keys)}: keep the ones dashboards group by"
        )
    seen: dict[str, str] = {}
    for key in keys:
        if not key.strip():
            raise ConfigError(f"kubernetes.pod_labels: a key is empty, got {list(keys)}")
        name = metric_label_name(key)
        if name in seen:
            raise ConfigError(
                f"kubernetes.pod_labels: {seen[name]!r} and {key!r} both become label {name}: "
                "keep one"
            )
        seen[name] = key


class PodMetricLabels:
    """The allowlisted labels of each pod workload, as the enricher last saw them, read
    by the exporter of gpufleet_workload_info (``names``, ``values``). Written by the
    ingest thread, read by scrapes: each write replaces one dict entry (atomic).

    With a ``store`` (the API server's pods), a pod this process did not enrich (a
    replica's batches go to their shard's owner) is answered from the store."""

    def __init__(self, keys: Sequence[str], store: MetadataStore | None = None) -> None:
        check_pod_labels(keys)
        self.keys, self._store = tuple(keys), store
        #: the label names, in ``keys`` order
        self.names = tuple(metric_label_name(k) for k in keys)
        self._empty = ("",) * len(self.keys)
        self._values: dict[str, tuple[str, ...]] = {}

    def record(self, workload: str, labels: Mapping[str, str]) -> None:
        """``workload``'s (its key) allowlisted values from its pod's ``labels``."""
        if not self.keys:
            return
        values = self._of(labels)
        if values == self._empty:
            self._values.pop(workload, None)
        else:
            self._values[workload] = values

    def values(self, workload: str) -> tuple[str, ...]:
        """The values in ``names`` order, "" where the pod has no such label (or is not
        known): Prometheus drops an empty label."""
        found = self._values.get(workload)
        if found is not None:
            return found
        if self._store is None or not workload.startswith(POD_KEY):
            return self._empty
        namespace, _, name = workload.removeprefix(POD_KEY).partition("/")
        labels = self._store.pod_labels(namespace, name)
        return self._of(labels) if labels is not None else self._empty

    def _of(self, labels: Mapping[str, str]) -> tuple[str, ...]:
        return tuple(str(labels.get(k, ""))[:MAX_VALUE_CHARS] for k in self.keys)

    def clear(self) -> None:
        self._values.clear()
