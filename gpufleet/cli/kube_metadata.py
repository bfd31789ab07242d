"""Wiring of the collector's Kubernetes metadata reader (collector/kube): the store, the
watches and the ingest-side enricher, when ``kubernetes.enabled``."""

from __future__ import annotations

import logging

from kubernetes.config.config_exception import ConfigException

from collector.actions.kubernetes import api_client
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.kube.labels import PodMetricLabels
from collector.kube.settings import KubeMetadataSettings
from collector.kube.store import MetadataStore
from collector.kube.watcher import MetadataWatcher

log = logging.getLogger("gpufleet.collector")


def start_metadata(
    settings: KubeMetadataSettings,
) -> tuple[WorkloadEnricher, MetadataWatcher | None]:
    """The enricher reading the started watches; when off, or when no API connection can
    be configured (logged), one of the labels the agents send, and no watcher."""
    keys, labels = keys_of(settings), PodMetricLabels(settings.pod_labels)
    if not settings.enabled:
        return WorkloadEnricher(keys, None, labels), None
    try:
        api = api_client(settings.connection())
    except (ConfigException, OSError) as err:
        log.error(
            "kubernetes.enabled is set but no API connection can be configured (%s): set "
            "kubernetes.host and token_file, or kubernetes.kubeconfig, or run in a pod with "
            "a service account; pods are attributed from what the agents send meanwhile",
            err,
        )
        return WorkloadEnricher(keys, None, labels), None
    store = MetadataStore(keys, settings.pod_labels, settings.max_pods, settings.max_owners)
    watcher = MetadataWatcher(api, store, settings)
    watcher.start()
    return WorkloadEnricher(keys, store, PodMetricLabels(settings.pod_labels, store)), watcher
