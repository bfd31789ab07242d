"""A local HTTP server speaking the Kubernetes API's list and watch protocol for the
resources the collector's metadata reader watches (pods, namespaces, ReplicaSets, Jobs,
StatefulSets, DaemonSets).

Lists are paginated (``limit``/``continue``) and carry the collection's resourceVersion.
``?watch=true&resourceVersion=N&allowWatchBookmarks=true&timeoutSeconds=T`` streams JSON
lines: every event after N, then new ones as tests make them, BOOKMARK events when a test
asks (``bookmark``), until T seconds pass. A watch from a version older than the
resource's compacted history (``compact``) gets what an API server sends then: HTTP 200
and an ERROR event with a Status of code 410 (Expired). One resourceVersion counter
spans all resources, as etcd's does. A resource in ``forbid`` answers 403; a request
without the token 401. Every request is recorded. ResourceClaims and ResourceSlices are
served under the resource.k8s.io versions asked for, which discovery lists.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "k8s-metadata-reader-token-3c9a"
CLUSTER = Path(__file__).resolve().parent.parent / "fixtures" / "kube" / "cluster.json"
PATHS = {
    "/api/v1/pods": ("pods", "PodList", "v1"),
    "/api/v1/namespaces": ("namespaces", "NamespaceList", "v1"),
    "/apis/apps/v1/replicasets": ("replicasets", "ReplicaSetList", "apps/v1"),
    "/apis/batch/v1/jobs": ("jobs", "JobList", "batch/v1"),
    "/apis/apps/v1/statefulsets": ("statefulsets", "StatefulSetList", "apps/v1"),
    "/apis/apps/v1/daemonsets": ("daemonsets", "DaemonSetList", "apps/v1"),
}
DRA_GROUP = "resource.k8s.io"


def dra_paths(version: str) -> dict[str, tuple[str, str, str]]:
    api = f"{DRA_GROUP}/{version}"
    return {
        f"/apis/{api}/resourceclaims": ("resourceclaims", "ResourceClaimList", api),
        f"/apis/{api}/resourceslices": ("resourceslices", "ResourceSliceList", api),
    }


def api_group(versions: tuple[str, ...]) -> dict[str, Any]:
    """The discovery answer of GET /apis/resource.k8s.io."""
    listed = [{"groupVersion": f"{DRA_GROUP}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": DRA_GROUP, "versions": listed,
            "preferredVersion": listed[0]}  # fmt: skip


@dataclass
class Request:
    path: str
    query: dict[str, str]


def recorded_cluster() -> dict[str, list[dict[str, Any]]]:
    """The recorded objects of tests/fixtures/kube/cluster.json, by resource."""
    raw = json.loads(CLUSTER.read_text(encoding="utf-8"))
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


class FakeKubeApi:
    def __init__(
        self,
        cluster: dict[str, list[dict[str, Any]]] | None = None,
        dra_versions: tuple[str, ...] = ("v1",),
    ) -> None:
        """``dra_versions``: the resource.k8s.io versions served (discovery and paths),
        newest first; () serves no DRA at all, as a cluster before 1.32."""
        self.version = 1000
        self.dra_versions = dra_versions
        self.paths = dict(PATHS)
        for version in dra_versions:
            self.paths.update(dra_paths(version))
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            r: {} for r, _, _ in self.paths.values()
        }
        #: resource -> [(version, type, object)], oldest first
        self.history: dict[str, list[tuple[int, str, dict[str, Any]]]] = {
            r: [] for r in self.objects
        }
        #: a watch from below this version is answered 410
        self.compacted: dict[str, int] = dict.fromkeys(self.objects, 0)
        self.forbid: set[str] = set()
        self.requests: list[Request] = []
        self._cond = threading.Condition()
        for resource, objs in (cluster or {}).items():
            if resource not in self.objects:  # DRA objects on a server without DRA
                continue
            for obj in objs:
                self._record(resource, "ADDED", obj, history=False)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- what tests do to the cluster ----------------------------------------------------

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        kind = "MODIFIED" if _key(obj) in self.objects[resource] else "ADDED"
        self._record(resource, kind, obj)

    def delete(self, resource: str, namespace: str, name: str) -> None:
        obj = self.objects[resource][(namespace, name)]
        self._record(resource, "DELETED", obj)

    def forget(self, resource: str, namespace: str, name: str) -> None:
        """Delete an object without a watch event: one that fell out of the history."""
        obj = self.objects[resource][(namespace, name)]
        self._record(resource, "DELETED", obj, history=False)

    def bookmark(self, resource: str) -> None:
        """Open watches of ``resource`` get a BOOKMARK at the current version."""
        with self._cond:
            self.history[resource].append((self.version, "BOOKMARK", {}))
            self._cond.notify_all()

    def compact(self, resource: str, below: int | None = None) -> None:
        """Forget ``resource``'s history: a watch from a version below ``below`` (default:
        the current version, which a list made now returns) gets 410."""
        with self._cond:
            self.compacted[resource] = self.version if below is None else below
            self.history[resource].clear()

    def watches(self, resource: str) -> list[Request]:
        paths = [p for p, (r, _, _) in self.paths.items() if r == resource]
        return [r for r in self.requests if r.path in paths and r.query.get("watch") == "true"]

    def lists(self, resource: str) -> list[Request]:
        paths = [p for p, (r, _, _) in self.paths.items() if r == resource]
        return [r for r in self.requests if r.path in paths and r.query.get("watch") != "true"]

    def _record(self, resource: str, kind: str, obj: dict[str, Any], history: bool = True) -> None:
        with self._cond:
            self.version += 1
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(self.version)
            if kind == "DELETED":
                self.objects[resource].pop(_key(obj), None)
            else:
                self.objects[resource][_key(obj)] = obj
            if history:
                self.history[resource].append((self.version, kind, obj))
            self._cond.notify_all()

    # -- the API server's side ------------------------------------------------------------

    def list_page(self, resource: str, kind: str, api: str, query: dict[str, str]) -> Any:
        with self._cond:
            items = sorted(self.objects[resource].items())
            version = self.version
        start = int(query.get("continue", "0"))
        limit = int(query.get("limit", "0")) or len(items)
        page = [obj for _, obj in items[start : start + limit]]
        meta: dict[str, Any] = {"resourceVersion": str(version)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {"kind": kind, "apiVersion": api, "metadata": meta, "items": page}

    def stream(self, resource: str, query: dict[str, str], write: Any) -> None:
        since = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        deadline = time.monotonic() + float(query.get("timeoutSeconds", "5"))
        if since < self.compacted[resource]:
            message = f"too old resource version: {since} ({self.compacted[resource]})"
            write({"type": "ERROR", "object": _status(410, "Expired", message)})
            return
        sent = since
        while True:
            with self._cond:
                history = self.history[resource]
                new = [e for e in history if e[0] > sent or e[1] == "BOOKMARK"]
                history[:] = [e for e in history if e[1] != "BOOKMARK"]  # each sent once
                if not new:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._cond.wait(min(left, 0.05))
                    continue
            for version, kind, obj in new:
                if kind == "BOOKMARK":
                    if bookmarks:
                        meta = {"resourceVersion": str(version)}
                        write({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": meta}})
                else:
                    write({"type": kind, "object": obj})
                sent = max(sent, version)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                fake.requests.append(Request(url.path, query))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._json(401, _status(401, "Unauthorized", "Unauthorized"))
                missing = "the server could not find the requested resource"
                if url.path.rstrip("/") == f"/apis/{DRA_GROUP}" and fake.dra_versions:
                    return self._json(200, api_group(fake.dra_versions))
                if url.path not in fake.paths:
                    return self._json(404, _status(404, "NotFound", missing))
                resource, kind, api = fake.paths[url.path]
                if resource in fake.forbid:
                    message = (f'{resource} is forbidden: User "system:serviceaccount:gpufleet:'
                               f'collector" cannot list resource "{resource}"')  # fmt: skip
                    return self._json(403, _status(403, "Forbidden", message))
                if query.get("watch") != "true":
                    return self._json(200, fake.list_page(resource, kind, api, query))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    fake.stream(resource, query, self._line)

            def _line(self, event: dict[str, Any]) -> None:
                self.wfile.write(json.dumps(event).encode() + b"\n")
                self.wfile.flush()

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
