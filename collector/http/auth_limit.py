"""Failed authentication, limited per client address (a token bucket each).

Every refused token (missing or wrong) takes one unit from its address's bucket, which
refills at ``rate_per_second`` up to ``burst``. An empty bucket means the address is
limited: its requests are answered 429 with ``Retry-After`` without looking at their
token at all, until a unit has refilled, so guessing tokens costs the guesser time, not the
collector CPU. A good token takes nothing, so an agent that authenticates is never slowed
by its own requests (one sharing an address with a guesser is: the address is all the
collector can tell apart). Behind a proxy every client has the proxy's address: the limit
then holds for all of them together.

The table holds at most ``max_addresses`` addresses, least recently refused evicted first
(an evicted address starts again with a full bucket), so memory stays bounded whatever the
number of sources. An address is logged once per ``log_every_seconds`` while it is limited
(the address only, never a token).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_ADDRESSES = 10_000
LOG_EVERY_SECONDS = 60.0


@dataclass
class _Bucket:
    units: float
    at: float
    logged_at: float = -math.inf


class FailureLimiter:
    """Per-address token buckets of authentication failures."""

    def __init__(
        self,
        rate_per_second: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
    ) -> None:
        self.rate_per_second = rate_per_second
        self.burst = burst
        self.clock = clock
        self.max_addresses = max_addresses
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until ``address`` may try again; None when it is not limited."""
        with self._lock:
            bucket = self._buckets.get(address)
            if bucket is None:
                return None
            self._refill(bucket)
            if bucket.units >= 1.0:
                return None
            self._log_once(address, bucket)
            return max(1, math.ceil((1.0 - bucket.units) / self.rate_per_second))

    def failed(self, address: str) -> None:
        """One refused token from ``address``."""
        with self._lock:
            bucket = self._buckets.pop(address, None)
            if bucket is None:
                bucket = _Bucket(float(self.burst), self.clock())
                while len(self._buckets) >= self.max_addresses:
                    self._buckets.popitem(last=False)
            self._refill(bucket)
            bucket.units = max(0.0, bucket.units - 1.0)
            self._buckets[address] = bucket  # most recently refused last

    def addresses(self) -> int:
        with self._lock:
            return len(self._buckets)

    def _refill(self, bucket: _Bucket) -> None:
        now = self.clock()
        elapsed = max(0.0, now - bucket.at)
        bucket.units = min(float(self.burst), bucket.units + elapsed * self.rate_per_second)
        bucket.at = now

    def _log_once(self, address: str, bucket: _Bucket) -> None:
        now = self.clock()
        if now - bucket.logged_at >= LOG_EVERY_SECONDS:
            bucket.logged_at = now
            log.warning(
                "client %s: more than %d failed authentications (refill %g/s); answering "
                "429 without checking its tokens (logged once a minute while it lasts)",
                address,
                self.burst,
                self.rate_per_second,
            )
