"""What an agent sent and what the collector answered, batch by batch: the sender's side of
the ledger's truth.

``Wire`` is the agent's real HTTP transport with every exchange kept (the body decoded to
the samples it carries, the answer's status and JSON); the proxy (proxy.py) keeps the same
``Exchange`` records from the collector's side of the network. A sample is identified by
its GPU and time stamp, so a sample acknowledged as new twice is one counted twice.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from agent.model import Batch

SampleKey = tuple[str, float]


@dataclass(frozen=True)
class Exchange:
    """One POST of a batch: when (monotonic seconds), what it carried, what came back
    (``status`` None: no answer, the connection failed)."""

    at: float
    node: str
    boot_id: str
    seq: int
    samples: tuple[SampleKey, ...]
    status: int | None
    ack: dict[str, Any] | None
    retry_after: str | None = None

    @property
    def ack_status(self) -> str | None:
        """The BatchAck's status ("accepted", "duplicate"); None without a 2xx ack."""
        if self.status is None or not 200 <= self.status < 300 or self.ack is None:
            return None
        status = self.ack.get("status")
        return status if isinstance(status, str) else None

    @property
    def accepted(self) -> bool:
        """Acknowledged as new: its samples are the collector's now."""
        return self.ack_status == "accepted"

    @property
    def acknowledged(self) -> bool:
        """Acknowledged, as new or as a duplicate of one the collector holds (its first
        answer lost, as when the collector is killed before it leaves)."""
        return self.ack_status in ("accepted", "duplicate")


def decode_batch(body: bytes, coding: str | None) -> Batch:
    raw = gzip.decompress(body) if (coding or "").lower() == "gzip" else body
    return msgspec.json.decode(raw, type=Batch)


def exchange(
    body: bytes,
    coding: str | None,
    status: int | None,
    content: bytes | None,
    retry_after: str | None,
    at: float,
) -> Exchange:
    batch = decode_batch(body, coding)
    ack: dict[str, Any] | None = None
    if content:
        try:
            decoded = msgspec.json.decode(content)
        except msgspec.DecodeError:
            decoded = None
        ack = decoded if isinstance(decoded, dict) else None
    return Exchange(
        at=at,
        node=batch.node,
        boot_id=batch.agent_boot_id,
        seq=batch.seq,
        samples=tuple((s.gpu_uuid, s.timestamp) for s in batch.samples),
        status=status,
        ack=ack,
        retry_after=retry_after,
    )


class Wire(httpx.BaseTransport):
    """Real HTTP, each batch POST and its answer kept in ``exchanges`` (thread-safe)."""

    def __init__(self) -> None:
        self._real = httpx.HTTPTransport()
        self._lock = threading.Lock()
        self.exchanges: list[Exchange] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body, coding, at = request.read(), request.headers.get("content-encoding"), time.monotonic()
        try:
            response = self._real.handle_request(request)
            content = response.read()
        except httpx.HTTPError:
            self._keep(exchange(body, coding, None, None, None, at))
            raise
        kept = exchange(
            body, coding, response.status_code, content, response.headers.get("retry-after"), at
        )
        self._keep(kept)
        return response

    def _keep(self, kept: Exchange) -> None:
        with self._lock:
            self.exchanges.append(kept)

    def close(self) -> None:
        self._real.close()


def acknowledged_samples(exchanges: Iterable[Exchange]) -> set[SampleKey]:
    """Every sample of a batch the collector acknowledged, as new or duplicate."""
    return {key for e in exchanges if e.acknowledged for key in e.samples}


def accepted_samples(exchanges: Iterable[Exchange]) -> Counter[SampleKey]:
    """How often each sample was acknowledged as new (2xx, status "accepted")."""
    counts: Counter[SampleKey] = Counter()
    for e in exchanges:
        if e.accepted:
            counts.update(e.samples)
    return counts
