"""A local HTTP server that speaks the few Kubernetes API paths the executor uses:
GET pod, GET replicaset, DELETE pod, PATCH deployments/scale and statefulsets/scale, and
GET/PATCH node (cordon: a merge patch of spec and metadata.annotations).

Pods are declared with their labels, annotations and owner; everything else answers 404
with a Status object, as the API server does. Every call is recorded.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "k8s-sa-token-5b1e"


@dataclass
class Call:
    method: str
    path: str
    body: Any
    content_type: str
    authorization: str


@dataclass
class FakePod:
    namespace: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owner: tuple[str, str] | None = (
        None  # ("Deployment", "web") / ("StatefulSet", "db") / ("Job", ..)
    )


def _status(code: int, reason: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "message": reason,
    }


class FakeKubernetes:
    def __init__(self, pods: list[FakePod], nodes: tuple[str, ...] = ()) -> None:
        self.pods = {(p.namespace, p.name): p for p in pods}
        #: node name -> {"unschedulable": bool, "annotations": {...}}
        self.nodes: dict[str, dict[str, Any]] = {
            n: {"unschedulable": False, "annotations": {}} for n in nodes
        }
        self.calls: list[Call] = []
        self.scales: dict[tuple[str, str, str], int] = {}  # (kind, ns, name) -> replicas
        self.deleted: list[tuple[str, str]] = []
        self.forbid: set[str] = set()  # methods answered 403
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
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

    def mutations(self) -> list[Call]:
        return [c for c in self.calls if c.method != "GET"]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length) if length else b""
                call = Call(
                    self.command,
                    self.path.split("?")[0],
                    json.loads(raw) if raw else None,
                    self.headers.get("Content-Type", ""),
                    self.headers.get("Authorization", ""),
                )
                with fake._lock:
                    fake.calls.append(call)
                    status, body = fake.route(call)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_DELETE = do_PATCH = _any

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def route(self, call: Call) -> tuple[int, dict[str, Any]]:
        if call.authorization != f"Bearer {TOKEN}":
            return 401, _status(401, "Unauthorized")
        if call.method in self.forbid:
            return 403, _status(403, "Forbidden")
        if m := re.fullmatch(r"/api/v1/nodes/([^/]+)", call.path):
            return self._node(call, m.group(1))
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)", call.path):
            return self._pod(call, m.group(1), m.group(2))
        if m := re.fullmatch(r"/apis/apps/v1/namespaces/([^/]+)/replicasets/([^/]+)", call.path):
            return self._replicaset(m.group(1), m.group(2))
        if m := re.fullmatch(
            r"/apis/apps/v1/namespaces/([^/]+)/(deployments|statefulsets)/([^/]+)/scale",
            call.path,
        ):
            return self._scale(call, m.group(2), m.group(1), m.group(3))
        return 404, _status(404, "NotFound")

    def _pod(self, call: Call, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        pod = self.pods.get((ns, name))
        if pod is None or call.method not in ("GET", "DELETE"):
            return 404, _status(404, "NotFound")
        if call.method == "DELETE":
            del self.pods[(ns, name)]
            self.deleted.append((ns, name))
        return 200, pod_json(pod)

    def _node(self, call: Call, name: str) -> tuple[int, dict[str, Any]]:
        node = self.nodes.get(name)
        if node is None or call.method not in ("GET", "PATCH"):
            return 404, _status(404, "NotFound")
        if call.method == "PATCH":
            spec = call.body.get("spec", {})
            if "unschedulable" in spec:
                node["unschedulable"] = bool(spec["unschedulable"])
            node["annotations"].update(call.body.get("metadata", {}).get("annotations", {}))
        meta = {"name": name, "annotations": dict(node["annotations"])}
        spec = {"unschedulable": True} if node["unschedulable"] else {}
        return 200, {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}

    def _replicaset(self, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        deployment = name.rsplit("-", 1)[0]
        meta = {
            "name": name,
            "namespace": ns,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment,
                    "uid": f"uid-{deployment}",
                    "controller": True,
                }
            ],
        }
        return 200, {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": meta,
            "spec": {"selector": {"matchLabels": {"app": deployment}}},
        }

    def _scale(self, call: Call, plural: str, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        if call.method != "PATCH":
            return 405, _status(405, "MethodNotAllowed")
        kind = "Deployment" if plural == "deployments" else "StatefulSet"
        replicas = int(call.body["spec"]["replicas"])
        self.scales[(kind, ns, name)] = replicas
        return 200, {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas},
            "status": {"replicas": 1},
        }


def pod_json(pod: FakePod) -> dict[str, Any]:
    owners = []
    if pod.owner is not None:
        kind, name = pod.owner
        owner_kind, owner_name = (
            ("ReplicaSet", f"{name}-7d9f8") if kind == "Deployment" else (kind, name)
        )
        owners = [
            {
                "apiVersion": "apps/v1",
                "kind": owner_kind,
                "name": owner_name,
                "uid": f"uid-{owner_name}",
                "controller": True,
            }
        ]
    meta = {
        "name": pod.name,
        "namespace": pod.namespace,
        "labels": pod.labels,
        "annotations": pod.annotations,
        "ownerReferences": owners,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "image": "pytorch:2"}]},
    }
