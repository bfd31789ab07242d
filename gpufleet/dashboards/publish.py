"""Upload dashboards to Grafana through its HTTP API.

``POST /api/folders`` creates the folder (409 or 412 mean it exists: then
``GET /api/folders/:uid`` confirms it), and ``POST /api/dashboards/db`` with
``overwrite: true`` creates or replaces each dashboard by uid. Grafana answers 412 when
someone changed the dashboard meanwhile or a dashboard of the same title sits in the folder;
the upload is retried once, then reported as failed with Grafana's status and message.
All I/O goes through one ``httpx.Client`` so tests can point it anywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

FOLDER_UID = "gpufleet"
FOLDER_TITLE = "gpufleet"


class PublishError(Exception):
    """Grafana refused a request; the message names the request and Grafana's answer."""


@dataclass(frozen=True)
class Published:
    uid: str
    url: str
    version: int


def _answer(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    if isinstance(body, dict):
        status, message = body.get("status", ""), body.get("message", "")
        return f"HTTP {response.status_code} {status}: {message}".strip()
    return f"HTTP {response.status_code}"


class GrafanaPublisher:
    """Creates the folder and uploads dashboards; ``client`` carries base URL and token."""

    def __init__(self, client: httpx.Client, folder_uid: str = FOLDER_UID) -> None:
        self._client = client
        self._folder_uid = folder_uid

    def ensure_folder(self, title: str = FOLDER_TITLE) -> None:
        response = self._client.post("/api/folders", json={"uid": self._folder_uid, "title": title})
        if response.status_code == 200:
            log.info("grafana: created folder %s", self._folder_uid)
            return
        if response.status_code in (409, 412):
            existing = self._client.get(f"/api/folders/{self._folder_uid}")
            if existing.status_code == 200:
                return
        raise PublishError(f"POST /api/folders {self._folder_uid!r}: {_answer(response)}")

    def upload(self, dashboard: Mapping[str, Any], message: str) -> Published:
        payload = {
            "dashboard": {**dashboard, "id": None},
            "folderUid": self._folder_uid,
            "overwrite": True,
            "message": message,
        }
        response = self._client.post("/api/dashboards/db", json=payload)
        if response.status_code == 412:
            log.warning("grafana: %s: %s; retrying once", dashboard["uid"], _answer(response))
            response = self._client.post("/api/dashboards/db", json=payload)
        if response.status_code != 200:
            raise PublishError(f"POST /api/dashboards/db {dashboard['uid']!r}: {_answer(response)}")
        body = response.json()
        return Published(
            str(body.get("uid")), str(body.get("url", "")), int(body.get("version", 0))
        )

    def publish(self, dashboards: Mapping[str, Mapping[str, Any]], message: str) -> list[Published]:
        """The folder, then every dashboard; the first refusal stops and raises."""
        self.ensure_folder()
        return [self.upload(board, message) for board in dashboards.values()]


def grafana_client(url: str, token: str, timeout_seconds: float = 30.0) -> httpx.Client:
    """An httpx client for Grafana at ``url`` with a service-account token."""
    return httpx.Client(
        base_url=url.rstrip("/"),
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        timeout=timeout_seconds,
    )
