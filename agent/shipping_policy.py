"""How the shipper talks to the collector and paces its retries; pure, no I/O.

``batch_headers`` are the headers of each POST, ``judge`` says what an answer means for the
batch sent (agent/shipper.py's module docstring lists the cases, agent/refusals.py the
collector's reasons), ``backoff_delay`` how long to wait after consecutive failures and
``retry_delay`` how long after a ``Retry-After``.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

import httpx
import msgspec

from agent import __version__
from agent.model import BatchAck
from agent.refusals import DEFINITIVE, NOT_COLLECTOR
from gpufleet.retry_after import http_date, retry_after_seconds

#: answers about the endpoint's load or timing, not the batch: a later retry can succeed
_TRANSIENT_4XX = frozenset({408, 425, 429})
#: the longest wait a ``Retry-After`` can impose; a longer one is cut to this
RETRY_AFTER_CAP_SECONDS = 300.0
#: a ``Retry-After`` wait is stretched by up to this fraction at random, so a fleet told
#: the same wait does not come back in lockstep (never shortened: the collector asked)
RETRY_AFTER_JITTER = 0.25


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
    #: the collector will never accept this batch: drop it, log and count it
    REJECTED = "rejected"
    #: too large for the collector or a proxy: send it again as two halves
    SPLIT = "split"
    #: refused for a reason someone can fix (token, clock, version, proxy): keep, back off
    HELD = "held"
    #: collector down, overloaded or unreachable: keep the batch, back off
    RETRY = "retry"


@dataclass(frozen=True)
class Verdict:
    """An answer read: the outcome, and what the log line and metrics need."""

    outcome: ShipOutcome
    #: the collector's reason, NOT_COLLECTOR, or for a retry a kind such as "http-503"
    reason: str
    #: the collector's own words, shortened (or the error for a network failure)
    message: str
    #: the HTTP status (0: no answer)
    status: int = 0
    #: how long the answer asked the agent to wait (``Retry-After``), before clamping
    retry_after_seconds: float | None = None
    #: how far the agent's clock is ahead of the collector's ``Date`` (None: no date)
    clock_ahead_seconds: float | None = None
    ack: BatchAck | None = None


def judge(response: httpx.Response, boot_id: str, seq: int, samples: int, now: float) -> Verdict:
    """What ``response`` means for batch ``(boot_id, seq)`` of ``samples`` samples sent at
    ``now`` (agent clock)."""
    code, message = response.status_code, collector_message(response)
    if 200 <= code < 300:
        ack = ack_for(response.content, boot_id, seq)
        if ack is None:
            return Verdict(
                ShipOutcome.RETRY, "ack", f"HTTP {code} without an ack for seq {seq}", code
            )
        return Verdict(ShipOutcome.ACKED, "acked", "", code, ack=ack)
    date = http_date(response.headers.get("date"))
    ahead = None if date is None else now - (date + 0.5)  # Date has whole seconds
    wait = retry_after_seconds(
        response.headers.get("retry-after"), now, response.headers.get("date")
    )
    reason = collector_reason(response)
    if code in (401, 403):
        return Verdict(ShipOutcome.HELD, "unauthorized", message, code, wait, ahead)
    if not 400 <= code < 500 or code in _TRANSIENT_4XX:
        return Verdict(ShipOutcome.RETRY, reason or f"http-{code}", message, code, wait, ahead)
    if code == 413 or reason == "too_large":
        if samples > 1:
            return Verdict(ShipOutcome.SPLIT, reason or NOT_COLLECTOR, message, code, wait, ahead)
        if reason is None:
            return Verdict(ShipOutcome.HELD, NOT_COLLECTOR, message, code, wait, ahead)
        return Verdict(ShipOutcome.REJECTED, reason, message, code, wait, ahead)
    if reason in DEFINITIVE:
        return Verdict(ShipOutcome.REJECTED, reason, message, code, wait, ahead)
    return Verdict(ShipOutcome.HELD, reason or NOT_COLLECTOR, message, code, wait, ahead)


def collector_reason(response: httpx.Response) -> str | None:
    """The ``reason`` of a gpufleet collector's JSON error body; None when the answer has
    no such body (a proxy, a wrong URL)."""
    try:
        body = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        return None
    if not isinstance(body, dict):
        return None
    reason, error = body.get("reason"), body.get("error")
    if isinstance(reason, str) and reason and isinstance(error, str):
        return reason
    return None


def backoff_delay(failures: int, initial: float, maximum: float, rng: random.Random) -> float:
    """Seconds to wait after ``failures`` (>= 1) consecutive failed sends.

    Uniform between ``initial`` and ``min(maximum, initial * 2**failures)``: the bound grows
    exponentially, and the jitter keeps a fleet of agents from retrying in lockstep after
    a collector outage. Never below ``initial``, so a failing collector is not hammered.
    """
    upper = min(maximum, initial * 2.0 ** min(failures, 64))
    return rng.uniform(initial, max(initial, upper))


def clamp_retry_after(asked_seconds: float, initial: float) -> float:
    """A ``Retry-After`` wait kept within [``initial``, RETRY_AFTER_CAP_SECONDS]."""
    return min(max(asked_seconds, initial), max(initial, RETRY_AFTER_CAP_SECONDS))


def retry_delay(asked_seconds: float, initial: float, rng: random.Random) -> float:
    """Seconds to wait when the collector asked for ``asked_seconds`` (``Retry-After``):
    the clamped wait, stretched by up to RETRY_AFTER_JITTER at random; never shorter."""
    return clamp_retry_after(asked_seconds, initial) * rng.uniform(1.0, 1.0 + RETRY_AFTER_JITTER)


def ack_for(content: bytes, boot_id: str, seq: int) -> BatchAck | None:
    """The BatchAck of batch ``(boot_id, seq)`` in a 2xx body; None when the body is not
    one (a proxy's page, another batch's ack)."""
    try:
        ack = msgspec.json.decode(content, type=BatchAck)
    except msgspec.DecodeError:
        return None
    return ack if ack.agent_boot_id == boot_id and ack.seq == seq else None


def collector_message(response: httpx.Response) -> str:
    """The collector's explanation, shortened for a log line."""
    text = response.text.strip().replace("\n", " ")
    return text[:300] or response.reason_phrase
