"""Read views built once and served many times: encoded bytes with an ``ETag``.

A view is keyed by its name and parameters and remembers the source it was built from:
a ``ReadVersion`` field (collector/backend.py: the live fleet's or the ledger's change
counter) or the generation of another entry it was derived from (a filtered page of a
fleet snapshot). It is served again while its source is unchanged and it is younger
than ``max_age_seconds`` on the app's clock (states turn ``unknown`` with time alone);
``refresh_seconds`` (monotonic) lets a busy collector, whose fleet changes with every
batch, serve an entry that young though its source moved: one build per refresh, not one a
request. A request whose ``If-None-Match`` names the entry's tag is answered 304 with no
body. Builds run in a worker thread; a fresh entry is answered on the event loop.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

#: views remembered at once (each distinct filter, page and window is one), least
#: recently used forgotten first
MAX_ENTRIES = 256
#: an entry is rebuilt at least this often on the app's clock, whatever its source says:
#: states turn ``unknown`` with time alone (``analysis.stale_after_seconds``, 60 s by
#: default), so a view at most 5 s old is never more than a tenth of that behind
MAX_AGE_SECONDS = 5.0
#: builds of keys in different stripes run at once; of one key, one at a time
BUILD_STRIPES = 16


@dataclass(frozen=True, slots=True)
class Entry:
    """One built view: ``value`` (encoded bytes, or a snapshot others derive from)."""

    value: Any
    #: the ETag, quoted; unique to this build in this process
    tag: str
    generation: int
    source: Hashable
    built_at: float
    built_monotonic: float


class ViewCache:
    """Entries by key; thread-safe. Requests that miss the same key at once wait for one
    build (a fleet snapshot at 10,000 GPUs takes ~100 ms) rather than each making it."""

    def __init__(
        self,
        clock: Callable[[], float],
        max_age_seconds: float = MAX_AGE_SECONDS,
        refresh_seconds: float = 0.0,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.clock = clock
        self.max_age_seconds = max_age_seconds
        self.refresh_seconds = refresh_seconds
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._stripes = [threading.RLock() for _ in range(BUILD_STRIPES)]  # a build may nest
        self._generation = 0
        #: tags from an earlier process never match this one's
        self._nonce = os.urandom(4).hex()
        #: builds so far (a test counts them)
        self.builds = 0

    def fresh(
        self, key: Hashable, source: Hashable, max_age_seconds: float | None = None
    ) -> Entry | None:
        """The entry for ``key`` if it may still be served for ``source``; a value that
        depends on its source alone (ledger rows) passes ``max_age_seconds=math.inf``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        oldest = self.max_age_seconds if max_age_seconds is None else max_age_seconds
        if self.clock() - entry.built_at >= oldest:
            return None
        if entry.source == source:
            return entry
        young = time.monotonic() - entry.built_monotonic < self.refresh_seconds
        return entry if young else None

    def forget(self, name: str) -> None:
        """Drop every view named ``name`` (the first part of its key): after an operator's
        action (a dismissal) the next read must show it, however young the view was."""
        with self._lock:
            for key in [k for k in self._entries if isinstance(k, tuple) and k[:1] == (name,)]:
                del self._entries[key]

    def build(
        self,
        key: Hashable,
        source: Hashable,
        make: Callable[[], Any],
        max_age_seconds: float | None = None,
    ) -> Entry:
        """``key``'s value built from ``source`` and remembered, unless a build that
        finished while this one waited for its stripe made it already."""
        with self._stripes[hash(key) % BUILD_STRIPES]:
            return self.fresh(key, source, max_age_seconds) or self._build(key, source, make)

    def _build(self, key: Hashable, source: Hashable, make: Callable[[], Any]) -> Entry:
        value = make()
        with self._lock:
            self._generation += 1
            self.builds += 1
            generation = self._generation
            tag = f'"{self._nonce}-{generation}"'
            entry = Entry(value, tag, generation, source, self.clock(), time.monotonic())
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return entry

    async def get(
        self,
        key: Hashable,
        source: Hashable,
        make: Callable[[], Any],
        max_age_seconds: float | None = None,
    ) -> Entry:
        """The fresh entry, or one built in a worker thread."""
        entry = self.fresh(key, source, max_age_seconds)
        if entry is None:
            entry = await run_in_threadpool(self.build, key, source, make, max_age_seconds)
        return entry


def cached_response(request: Request, entry: Entry) -> Response:
    """``entry``'s bytes as JSON with its ETag, or 304 when the client holds them."""
    headers = {"ETag": entry.tag, "Cache-Control": "private, no-cache"}
    if _matches(request.headers.get("if-none-match"), entry.tag):
        return Response(status_code=304, headers=headers)
    return Response(entry.value, headers=headers, media_type="application/json")


def _matches(header: str | None, tag: str) -> bool:
    """RFC 9110 weak comparison: ``*``, or any listed tag equal with ``W/`` ignored."""
    if not header:
        return False
    tags = {part.strip().removeprefix("W/") for part in header.split(",")}
    return "*" in tags or tag in tags
