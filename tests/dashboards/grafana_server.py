"""A small Grafana stand-in on loopback: the folder and dashboard endpoints that
``gpufleet dashboards publish`` uses, with Grafana's status codes and checks.

It checks the bearer token (401), the payload shape (400 naming the field), stores
folders and dashboards by uid, answers 409 for an existing folder uid, 412
``version-mismatch`` for a stale dashboard without ``overwrite``, and can be told to answer
412 a number of times for a uid (someone else saving it meanwhile).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class GrafanaState:
    token: str
    folders: dict[str, str] = field(default_factory=dict)  # uid -> title
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> stored
    refuse_412: dict[str, int] = field(default_factory=dict)  # uid -> 412s left
    requests: list[tuple[str, str]] = field(default_factory=list)


def _dashboard_problem(body: Any, state: GrafanaState) -> str | None:
    if not isinstance(body, dict) or not isinstance(body.get("dashboard"), dict):
        return "dashboard: missing"
    board = body["dashboard"]
    for key in ("uid", "title", "panels", "schemaVersion"):
        if key not in board:
            return f"dashboard.{key}: missing"
    if board.get("id") is not None:
        return "dashboard.id: must be null for an import"
    if body.get("folderUid") not in state.folders:
        return "folderUid: folder not found"
    return None


class _Handler(BaseHTTPRequestHandler):
    state: GrafanaState

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {self.state.token}":
            return True
        self._send(401, {"message": "invalid API key"})
        return False

    def do_GET(self) -> None:
        self.state.requests.append(("GET", self.path))
        if not self._authorised():
            return
        uid = self.path.removeprefix("/api/folders/")
        if self.path.startswith("/api/folders/") and uid in self.state.folders:
            self._send(200, {"uid": uid, "title": self.state.folders[uid]})
        else:
            self._send(404, {"message": "not found"})

    def do_POST(self) -> None:
        self.state.requests.append(("POST", self.path))
        if not self._authorised():
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._send(400, {"message": "bad json"})
            return
        if self.path == "/api/folders":
            self._folder(body)
        elif self.path == "/api/dashboards/db":
            self._dashboard(body)
        else:
            self._send(404, {"message": "not found"})

    def _folder(self, body: Any) -> None:
        uid, title = body.get("uid"), body.get("title")
        if not uid or not title:
            self._send(400, {"message": "uid and title required"})
        elif uid in self.state.folders:
            self._send(409, {"message": "a folder with the same uid already exists"})
        else:
            self.state.folders[uid] = title
            self._send(200, {"uid": uid, "title": title, "id": len(self.state.folders)})

    def _dashboard(self, body: Any) -> None:
        problem = _dashboard_problem(body, self.state)
        if problem:
            self._send(400, {"message": problem})
            return
        board = body["dashboard"]
        uid = board["uid"]
        if self.state.refuse_412.get(uid, 0) > 0:
            self.state.refuse_412[uid] -= 1
            self._send(412, {"status": "version-mismatch", "message": "changed by someone else"})
            return
        stored = self.state.dashboards.get(uid)
        if stored is not None and not body.get("overwrite"):
            self._send(412, {"status": "version-mismatch", "message": "changed by someone else"})
            return
        version = (stored["version"] + 1) if stored else 1
        self.state.dashboards[uid] = {**body, "version": version}
        self._send(200, {"uid": uid, "url": f"/d/{uid}/x", "version": version, "status": "success"})


@contextmanager
def grafana(token: str) -> Iterator[tuple[str, GrafanaState]]:
    """A running stand-in; yields its base URL and its state."""
    state = GrafanaState(token)
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
