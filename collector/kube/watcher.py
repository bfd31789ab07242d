"""One list+watch per resource (pods, namespaces, ReplicaSets, Jobs, StatefulSets,
DaemonSets; ResourceClaims and
ResourceSlices where API discovery finds resource.k8s.io v1 or v1beta1) through the
official ``kubernetes`` client, feeding a MetadataStore.

Each resource has a thread: list (paginated), then watch from the list's resourceVersion
with bookmarks, reopening the watch where the last event or bookmark left it. A ``410
Gone`` (the version is too old) relists. A failure (the API server unreachable, 401, 403)
is logged once until it clears, with what to do, and retried with a doubling backoff;
attribution meanwhile falls back to what the agents send. Objects are kept as raw JSON
dicts (never deserialised into the client's models: a pod model is ~50 objects).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from collector.kube.claims import CLAIM, SLICE
from collector.kube.settings import KubeMetadataSettings
from collector.kube.store import (
    DAEMONSET,
    JOB,
    NAMESPACE,
    POD,
    REPLICASET,
    STATEFULSET,
    MetadataStore,
)

log = logging.getLogger(__name__)
#: objects per page of a list
PAGE = 500
#: (API group, plural) of each resource, for RBAC messages
GROUPS = {
    POD: "", NAMESPACE: "", REPLICASET: "apps", JOB: "batch",
    STATEFULSET: "apps", DAEMONSET: "apps",
    CLAIM: "resource.k8s.io", SLICE: "resource.k8s.io",
}  # fmt: skip


class Gone(Exception):
    """The watch's resourceVersion is too old (410): relist."""


@dataclass
class WatchStats:
    """What one resource's watch did; read by tests and the log."""

    lists: int = 0
    relists_after_gone: int = 0
    events: int = 0
    bookmarks: int = 0
    failures: int = 0


def list_functions(api: k8s.ApiClient) -> dict[str, Callable[..., Any]]:
    """The client's list-for-all-namespaces call of each resource."""
    core, apps, batch = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.BatchV1Api(api)
    return {
        POD: core.list_pod_for_all_namespaces,
        NAMESPACE: core.list_namespace,
        REPLICASET: apps.list_replica_set_for_all_namespaces,
        JOB: batch.list_job_for_all_namespaces,
        STATEFULSET: apps.list_stateful_set_for_all_namespaces,
        DAEMONSET: apps.list_daemon_set_for_all_namespaces,
    }


class ResourceWatch:
    """The list+watch loop of one resource."""

    def __init__(
        self,
        resource: str,
        list_fn: Callable[..., Any],
        store: MetadataStore,
        settings: KubeMetadataSettings,
        stop: threading.Event,
    ) -> None:
        self.resource, self._list_fn, self.store = resource, list_fn, store
        self.settings, self._stop = settings, stop
        self.stats = WatchStats()
        self._problem = ""  # the failure logged last, "" when fine
        self._resp: Any = None

    def run(self) -> None:
        backoff = self.settings.backoff_initial_seconds
        while not self._stop.is_set():
            watched = False
            try:
                version = self.relist()
                self._recovered()
                while not self._stop.is_set():
                    version = self.watch(version)
                    watched, backoff = True, self.settings.backoff_initial_seconds
            except Gone:
                self.stats.relists_after_gone += 1
                log.info("kubernetes %s: watch expired (410 Gone); listing again", self.resource)
                if not watched:  # gone again straight after a list: do not hammer the server
                    self._stop.wait(backoff)
                    backoff = min(2 * backoff, self.settings.backoff_max_seconds)
            except ApiException as err:
                self._failed(describe_refusal(self.resource, err.status, err.reason))
            except Exception as err:  # connection errors, bad JSON: retried, never fatal
                self._failed(f"the API server cannot be read ({type(err).__name__}: {err})")
            else:
                continue
            if self._problem:
                self._stop.wait(backoff)
                backoff = min(2 * backoff, self.settings.backoff_max_seconds)

    def relist(self) -> str:
        """List every object (in pages), replace the store's; the list's resourceVersion."""
        objects: list[Mapping[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            page = json.loads(self._list_fn(**kwargs).data)
            objects += page.get("items") or []
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        self.store.replace(self.resource, objects)
        self.stats.lists += 1
        return str(meta.get("resourceVersion", ""))

    def watch(self, version: str) -> str:
        """Watch from ``version`` until the server ends the stream; the version to go on
        from (the last event's or bookmark's)."""
        timeout = self.settings.watch_timeout_seconds
        try:
            self._resp = resp = self._list_fn(
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _preload_content=False,
                _request_timeout=(10, timeout + 30),
            )
        except ApiException as err:
            if err.status == 410:
                raise Gone() from err
            raise
        try:
            for event in _events(resp):
                version = self._event(event) or version
                if self._stop.is_set():
                    break
        finally:
            self._resp = None
            resp.release_conn()
        return version

    def close(self) -> None:
        """End a watch stream in progress (from another thread)."""
        resp = self._resp
        if resp is None:
            return
        # the stream may have ended meanwhile (the socket closed or released): then done
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            resp.shutdown()

    def _event(self, event: Mapping[str, Any]) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiException(status=obj.get("code"), reason=obj.get("message"))
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
        else:
            self.stats.events += 1
            self.store.apply(self.resource, str(kind), obj)
        return str((obj.get("metadata") or {}).get("resourceVersion", ""))

    def _failed(self, problem: str) -> None:
        self.stats.failures += 1
        if problem != self._problem:
            log.warning("kubernetes metadata (%s): %s", self.resource, problem)
        self._problem = problem

    def _recovered(self) -> None:
        if self._problem:
            log.info("kubernetes metadata (%s): reading again", self.resource)
        self._problem = ""


def describe_refusal(resource: str, status: int | None, reason: object) -> str:
    """What a refused list or watch means, and what to do about it."""
    group = GROUPS[resource] or '"" (core)'
    if status == 401:
        return (
            "the API server refused the credentials (401 Unauthorized): check "
            "kubernetes.token_file or kubernetes.kubeconfig"
        )
    if status == 403:
        return (
            f"forbidden (403) to list and watch {resource} in API group {group}: grant the "
            f"collector's service account the verbs get, list, watch on {resource}"
        )
    return f"the API server answered HTTP {status} ({reason}) listing {resource}"


def _events(resp: Any) -> Iterator[Mapping[str, Any]]:
    for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
        if line.strip():
            event = json.loads(line)
            if isinstance(event, dict):
                yield event


#: the resource.k8s.io versions read, newest first: v1 (Kubernetes 1.34, DRA GA), v1beta1
DRA_VERSIONS = ("v1", "v1beta1")


def dra_version(api: k8s.ApiClient) -> str | None:
    """The newest resource.k8s.io version the server serves (API discovery), None when it
    serves none we read (DRA off, or a cluster older than 1.32)."""
    try:
        group = k8s.ResourceApi(api).get_api_group()
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    served = {v.version for v in group.versions or ()}
    return next((v for v in DRA_VERSIONS if v in served), None)


def dra_functions(api: k8s.ApiClient, version: str) -> dict[str, Callable[..., Any]]:
    resource = k8s.ResourceV1Api(api) if version == "v1" else k8s.ResourceV1beta1Api(api)
    return {
        CLAIM: resource.list_resource_claim_for_all_namespaces,
        SLICE: resource.list_resource_slice,
    }


class MetadataWatcher:
    """The watches of every resource, each on its own daemon thread; ResourceClaims and
    ResourceSlices too where API discovery finds resource.k8s.io."""

    def __init__(self, api: k8s.ApiClient, store: MetadataStore, settings: KubeMetadataSettings):
        self.stop_event = threading.Event()
        self.store, self._api, self._settings = store, api, settings
        self.watches = [
            ResourceWatch(resource, fn, store, settings, self.stop_event)
            for resource, fn in list_functions(api).items()
        ]
        #: the resource.k8s.io version found, None until (or unless) discovery finds one
        self.dra: str | None = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for w in self.watches:
            self._run(w)
        self._thread(self._discover_dra, "kube-dra")

    def _run(self, w: ResourceWatch) -> None:
        self._thread(w.run, f"kube-{w.resource}")

    def _thread(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _discover_dra(self) -> None:
        """Find resource.k8s.io and start its watches; retried with backoff while the
        API server cannot answer, given up (logged once) when it serves no version."""
        backoff = self._settings.backoff_initial_seconds
        while not self.stop_event.is_set():
            try:
                version = dra_version(self._api)
            except Exception as err:  # unreachable: the resource watches log it
                log.debug("kubernetes metadata: DRA discovery failed (%s)", err)
                self.stop_event.wait(backoff)
                backoff = min(2 * backoff, self._settings.backoff_max_seconds)
                continue
            if version is None:
                log.info("kubernetes metadata: the API server serves no resource.k8s.io "
                         "%s; GPUs allocated through ResourceClaims come from the agents",
                         " or ".join(DRA_VERSIONS))  # fmt: skip
                return
            self.dra = version
            for resource, fn in dra_functions(self._api, version).items():
                w = ResourceWatch(resource, fn, self.store, self._settings, self.stop_event)
                self.watches.append(w)
                self._run(w)
            return

    def close(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        for w in self.watches:
            w.close()
        for thread in self._threads:
            thread.join(timeout)
