"""Notification counters and the Prometheus collector that exposes them.

Labels are channel *names* and service kinds from the configuration, never URLs.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from collector.metrics.catalogue import (
    NOTIFY,
    NOTIFY_CHANNEL_BROKEN,
    NOTIFY_MESSAGES,
    NOTIFY_OUTBOX_PENDING,
)
from collector.metrics.exporter import family


class NotifyStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: Counter[tuple[str, str, str]] = Counter()
        self._broken: dict[str, tuple[str, str]] = {}  # channel -> (kind, reason)

    def count(self, channel: str, kind: str, outcome: str) -> None:
        with self._lock:
            self._messages[(channel, kind, outcome)] += 1

    def mark_broken(self, channel: str, kind: str, reason: str) -> None:
        with self._lock:
            self._broken[channel] = (kind, reason)

    def broken(self) -> dict[str, tuple[str, str]]:
        with self._lock:
            return dict(self._broken)

    def messages(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            return dict(self._messages)


class NotifyExporter(Collector):
    """``gpufleet_notify_messages_total{channel,kind,outcome}``,
    ``gpufleet_notify_channel_broken{channel,kind}`` (1 = a permanent error; fix the
    configuration), ``gpufleet_notify_outbox_pending{channel}``."""

    def __init__(
        self,
        stats: NotifyStats,
        channels: Mapping[str, str],
        pending: Callable[[], Mapping[str, int]],
    ) -> None:
        self.stats = stats
        self.channels = dict(channels)  # name -> kind
        self.pending = pending

    def describe(self) -> list[CounterMetricFamily | GaugeMetricFamily]:
        return [family(spec) for spec in NOTIFY]

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        messages = family(NOTIFY_MESSAGES)
        for (channel, kind, outcome), value in sorted(self.stats.messages().items()):
            messages.add_metric([channel, kind, outcome], value)
        yield messages
        broken = family(NOTIFY_CHANNEL_BROKEN)
        down = self.stats.broken()
        for name, kind in sorted(self.channels.items()):
            broken.add_metric([name, kind], 1.0 if name in down else 0.0)
        yield broken
        pending = family(NOTIFY_OUTBOX_PENDING)
        counts = self.pending()
        for name in sorted(self.channels):
            pending.add_metric([name], float(counts.get(name, 0)))
        yield pending
