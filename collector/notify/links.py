"""Where a message points: the recommendation in the console, the dashboard in Grafana.

``collector_url`` is ``server.public_url`` (the demo sets it to its own URL);
``grafana_url`` is ``server.grafana_url``, the Grafana the gpufleet dashboards are in
(dashboards/, uids ``gpufleet-workload``, ``gpufleet-node``, ``gpufleet-fleet``). Either
empty: no such link.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode


@dataclass(frozen=True)
class Links:
    collector_url: str = ""
    grafana_url: str = ""


def console_url(links: Links, rec_id: str = "", workload: str = "") -> str:
    """The recommendation's row in the console, else the workload's page, else the list."""
    base = links.collector_url.rstrip("/")
    if not base:
        return ""
    if rec_id:
        return f"{base}/ui/recommendations?{urlencode({'id': rec_id})}"
    if workload:
        return f"{base}/ui/workload?{urlencode({'key': workload})}"
    return f"{base}/ui/recommendations"


def grafana_url(links: Links, workload: str = "", namespace: str = "", node: str = "") -> str:
    """The workload's dashboard, else the node's, else the fleet overview."""
    base = links.grafana_url.rstrip("/")
    if not base:
        return ""
    if workload:
        query = {"var-workload": workload, **({"var-namespace": namespace} if namespace else {})}
        return f"{base}/d/gpufleet-workload?{urlencode(query)}"
    if node:
        return f"{base}/d/gpufleet-node?{urlencode({'var-node': node})}"
    return f"{base}/d/gpufleet-fleet"
