"""How the shipper talks to the collector and paces its retries; pure, no I/O.

``batch_headers`` are the headers of each POST, ``classify`` says what an HTTP status means
for a batch (agent/shipper.py's module docstring lists the cases), ``is_ack_for`` whether a
2xx body acknowledges the batch sent, and ``backoff_delay`` how long to wait after
consecutive failures.
"""

from __future__ import annotations

import enum
import random

import httpx
import msgspec

from agent import __version__
from agent.model import BatchAck

#: 4xx answers about the endpoint rather than the batch: a later retry can succeed
_ENDPOINT_4XX = frozenset({404, 405, 408, 415, 425, 429})


def batch_headers(token: str | None) -> dict[str, str]:
    """A batch POST's headers: gzipped JSON, the agent's version, the bearer token if any."""
    headers = {
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
        "User-Agent": f"gpufleet-agent/{__version__}",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class ShipOutcome(enum.Enum):
    """What one attempt to ship a batch to the collector came to."""

    ACKED = "acked"
    #: the collector will never accept this batch: drop it and count it
    REJECTED = "rejected"
    #: the token was refused: keep the batch, back off
    UNAUTHORIZED = "unauthorized"
    #: collector down, overloaded or unreachable: keep the batch, back off
    RETRY = "retry"


def classify(status_code: int) -> ShipOutcome:
    """What an HTTP status means for the batch (a 2xx still needs a valid ack)."""
    if 200 <= status_code < 300:
        return ShipOutcome.ACKED
    if status_code in (401, 403):
        return ShipOutcome.UNAUTHORIZED
    if 400 <= status_code < 500 and status_code not in _ENDPOINT_4XX:
        return ShipOutcome.REJECTED
    return ShipOutcome.RETRY


def backoff_delay(failures: int, initial: float, maximum: float, rng: random.Random) -> float:
    """Seconds to wait after ``failures`` (>= 1) consecutive failed sends.

    Uniform between ``initial`` and ``min(maximum, initial * 2**failures)``: the bound grows
    exponentially, and the jitter keeps a fleet of agents from retrying in lockstep after
    a collector outage. Never below ``initial``, so a failing collector is not hammered.
    """
    upper = min(maximum, initial * 2.0 ** min(failures, 64))
    return rng.uniform(initial, max(initial, upper))


def is_ack_for(content: bytes, boot_id: str, seq: int) -> bool:
    """Whether a 2xx body is the BatchAck of batch ``(boot_id, seq)``; False when it does
    not decode as one."""
    try:
        ack = msgspec.json.decode(content, type=BatchAck)
    except msgspec.DecodeError:
        return False
    return ack.agent_boot_id == boot_id and ack.seq == seq


def collector_message(response: httpx.Response) -> str:
    """The collector's explanation, shortened for a log line."""
    text = response.text.strip().replace("\n", " ")
    return text[:300] or response.reason_phrase
