"""``Retry-After`` (RFC 9110 §10.2.3) in seconds, for every client the project has: the
agent's shipper reads it from a collector shedding load, the collector's chat delivery from
a chat service's 429.

The header is either delta-seconds (``120``) or an HTTP-date. A date is measured against
the answer's own ``Date`` header when it has one, so a client whose clock is off still
waits as long as the server asked; else against the client's clock.
"""

from __future__ import annotations

import math
from email.utils import parsedate_to_datetime


def http_date(value: str | None) -> float | None:
    """An HTTP-date (``Sun, 06 Nov 1994 08:49:37 GMT``) as Unix seconds; None when absent
    or unreadable."""
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def retry_after_seconds(value: str | None, now: float, date: str | None = None) -> float | None:
    """Seconds to wait that a ``Retry-After`` header ``value`` asks for, never negative;
    None when absent or unreadable. ``now`` is the client's clock (Unix seconds), ``date``
    the answer's ``Date`` header."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        when = http_date(value)
        if when is None:
            return None
        sent = http_date(date)
        seconds = when - (now if sent is None else sent)
    return max(0.0, seconds) if math.isfinite(seconds) else None
