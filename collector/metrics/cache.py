"""``/metrics`` at the cost of what changed: the committed-data collectors' exposition is
rendered once per change and kept (text and gzip), the cheap live collectors are rendered
on every scrape and appended.

A collector is *committed-data* when it has a ``refresh`` attribute (``Refresh``): what it
reports changes only when the ledger commits (``COMMIT``: per-workload totals), or also when
the applier applies samples (``APPLY``: fleet state, recommendations, the write path, the
rates). Its families are collected once after such a change, an APPLY one again after
``max_age_seconds`` too (the apply interval: idle times grow and GPUs go stale with time
alone), whatever the number of scrapers. A collector without ``refresh`` (ingest counters, auth
failures, admission, export errors...) is live. The ledger's observers tell commits
(``write_committed``: this is a LedgerObserver); the apply job tells applying (``changed``).

Both formats prometheus_client negotiates (text 0.0.4 and OpenMetrics) are kept, each
rendered on first request after a change. A collector with ``families()`` (ours, from the
catalogue) is written by collector/metrics/families.py; any other through prometheus_client.
A gzip-accepting scraper gets one gzip stream: the cached part compressed once, the live
tail compressed onto a copy of the compressor's state.

Collectors refreshed together share what they read through ``once_per_render`` (the fleet
views FleetExporter and the rates both need: ~45 ms at 10,000 GPUs), and each slot keeps
its series' lines (``families.SeriesWriter``), so a render writes only the values that
changed.
"""

from __future__ import annotations

import enum
import logging
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_1
from prometheus_client.registry import Collector

from collector.ledger.observers import StoredBatch
from collector.ledger.records import LedgerWrite
from collector.metrics.families import OPENMETRICS_EOF, Family, SeriesWriter, filled

log = logging.getLogger(__name__)

#: gzip level of the cached part: 7.2 MB at 10,000 GPUs compresses ~14x at level 1
GZIP_LEVEL = 1
_EOF = OPENMETRICS_EOF.encode()
T = TypeVar("T")


class Refresh(enum.Enum):
    """When a committed-data collector's families can change."""

    COMMIT = "commit"  # at a ledger commit only
    APPLY = "apply"  # when samples are applied, at commits, and with time


class Scrape(NamedTuple):
    body: bytes
    content_type: str
    #: "gzip" when ``body`` is gzipped, else None
    encoding: str | None


@dataclass
class _Slot:
    """One committed-data collector and what it said at its last refresh."""

    collector: Collector
    refresh: Refresh
    snapshot: list[Metric] | list[Family] | None = None
    collected_at: float = 0.0
    #: content type -> the snapshot rendered in it
    rendered: dict[str, bytes] = field(default_factory=dict)
    #: keeps the series' lines from one render to the next
    writer: SeriesWriter = field(default_factory=SeriesWriter)


@dataclass
class _Rendered:
    """The cached part in one format, and its gzip (made on first request)."""

    text: bytes
    gzipped: bytes | None = None
    compressor: zlib._Compress | None = None


class _RenderMemo:
    """Answers kept for the length of one render, in the rendering thread only."""

    def __init__(self) -> None:
        self._answers: dict[Callable[[float], object], object] = {}
        self._thread: int | None = None

    @contextmanager
    def render(self) -> Iterator[None]:
        self._thread = threading.get_ident()
        try:
            yield
        finally:
            self._thread = None
            self._answers.clear()

    def call(self, compute: Callable[[float], T], now: float) -> T:
        if self._thread != threading.get_ident():
            return compute(now)
        if compute not in self._answers:
            self._answers[compute] = compute(now)
        return self._answers[compute]  # type: ignore[return-value]


class Exposition:
    """The body of ``GET /metrics``; thread-safe (scrapes render in worker threads)."""

    def __init__(self, clock: Callable[[], float], max_age_seconds: float) -> None:
        self._clock = clock
        self.max_age_seconds = max_age_seconds
        #: every collector, for prometheus_client's duplicate-name check and the live ones
        self._names = CollectorRegistry(auto_describe=True)
        self._live = CollectorRegistry(auto_describe=True)
        self._slots: list[_Slot] = []
        self._rendered: dict[str, _Rendered] = {}
        #: bumped by every refresh of a slot: a format's cached part is of one generation
        self._generation = 0
        self._built: dict[str, int] = {}
        self._memo = _RenderMemo()
        self._lock = threading.Lock()

    def register(self, collector: Collector) -> None:
        """Add ``collector``: cached when it has a ``refresh`` (``Refresh``), else live."""
        self._names.register(collector)
        refresh = getattr(collector, "refresh", None)
        if isinstance(refresh, Refresh):
            self._slots.append(_Slot(collector, refresh))
        else:
            self._live.register(collector)

    def once_per_render(self, compute: Callable[[float], T]) -> Callable[[float], T]:
        """``compute(now)`` shared by the collectors refreshed in one render: computed by the
        first caller (at its ``now``), the same answer given to the others; outside a render
        (another thread, a collector used on its own) a plain call. Wrappers of equal
        callables (the same bound method of the same object) share the answer."""
        memo = self._memo
        return lambda now: memo.call(compute, now)

    def changed(self, refresh: Refresh) -> None:
        """Data changed: ``APPLY`` (samples applied) drops the APPLY collectors' families,
        ``COMMIT`` every cached one's; the next scrape collects them again."""
        with self._lock:
            for slot in self._slots:
                if refresh is Refresh.COMMIT or slot.refresh is Refresh.APPLY:
                    slot.snapshot = None

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        """Stored batches are not applied yet: nothing /metrics shows changed."""

    def write_committed(self, write: LedgerWrite) -> None:
        self.changed(Refresh.COMMIT)

    def scrape(self, accept: str, accept_encoding: str) -> Scrape:
        """The body for a request's ``Accept`` and ``Accept-Encoding`` headers."""
        encoder, content_type = choose_encoder(accept)
        openmetrics = content_type.startswith("application/openmetrics-text")
        with self._lock:
            cached = self._cached(content_type, encoder, openmetrics)
        tail = encoder(self._live)
        if openmetrics:
            tail = tail.removesuffix(_EOF) + _EOF
        if not _gzip_accepted(accept_encoding):
            return Scrape(cached.text + tail, content_type, None)
        with self._lock:
            head, compressor = self._gzipped(cached)
        return Scrape(head + compressor.compress(tail) + compressor.flush(), content_type, "gzip")

    def cached_part(self, accept: str = "") -> bytes:
        """The committed-data part of the body for ``accept`` as served now (tests)."""
        encoder, content_type = choose_encoder(accept)
        with self._lock:
            openmetrics = content_type.startswith("application/openmetrics-text")
            return self._cached(content_type, encoder, openmetrics).text

    def _cached(
        self, content_type: str, encoder: Callable[[Collector], bytes], openmetrics: bool
    ) -> _Rendered:
        self._refresh(self._clock())
        if self._built.get(content_type) != self._generation or content_type not in self._rendered:
            parts = [self._part(slot, content_type, encoder, openmetrics) for slot in self._slots]
            self._rendered[content_type] = _Rendered(b"".join(parts))
            self._built[content_type] = self._generation
        return self._rendered[content_type]

    def _refresh(self, now: float) -> None:
        """Collect again every slot that changed or (APPLY) aged, as one render."""
        with self._memo.render():
            for slot in self._slots:
                aged = now - slot.collected_at >= self.max_age_seconds
                stale = aged and slot.refresh is Refresh.APPLY
                if slot.snapshot is None or stale:
                    slot.snapshot, slot.collected_at = _collect(slot.collector), now
                    slot.rendered = {}
                    self._generation += 1

    @staticmethod
    def _part(
        slot: _Slot, content_type: str, encoder: Callable[[Collector], bytes], openmetrics: bool
    ) -> bytes:
        if content_type not in slot.rendered:
            slot.rendered[content_type] = _render(slot, content_type, encoder, openmetrics)
        return slot.rendered[content_type]

    def _gzipped(self, cached: _Rendered) -> tuple[bytes, zlib._Compress]:
        if cached.gzipped is None or cached.compressor is None:
            compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            head = compressor.compress(cached.text) + compressor.flush(zlib.Z_SYNC_FLUSH)
            cached.gzipped, cached.compressor = head, compressor
        return cached.gzipped, cached.compressor.copy()


def _collect(collector: Collector) -> list[Metric] | list[Family]:
    """What ``collector`` says now: its catalogue families when it offers them."""
    try:
        families = getattr(collector, "families", None)
        if callable(families):
            return list(families())
        return list(collector.collect())
    except Exception:  # one failing collector must not fail the scrape
        log.exception("/metrics: %s failed; left out until it answers", type(collector).__name__)
        return []


def _render(
    slot: _Slot, content_type: str, encoder: Callable[[Collector], bytes], openmetrics: bool
) -> bytes:
    snapshot = slot.snapshot or []
    ours = all(isinstance(item, Family) for item in snapshot)
    if ours and content_type in (CONTENT_TYPE_PLAIN_0_0_4, OPENMETRICS_1):
        return slot.writer.render(snapshot, openmetrics).encode()  # type: ignore[arg-type]
    metrics = [
        item if isinstance(item, Metric) else filled(item.spec, item.values) for item in snapshot
    ]
    return encoder(_Collected(metrics)).removesuffix(_EOF)


class _Collected:
    """Metrics already collected, as prometheus_client's encoders read a registry."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        self._metrics = list(metrics)

    def collect(self) -> Iterable[Metric]:
        return self._metrics


def _gzip_accepted(accept_encoding: str) -> bool:
    """Whether the request's Accept-Encoding lists gzip (without q=0)."""
    for coding in accept_encoding.split(","):
        name, _, params = coding.partition(";")
        if name.strip().lower() == "gzip":
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False
