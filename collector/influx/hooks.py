"""Where the InfluxDB sink meets the collector: a ledger observer and the sink's metrics.

``InfluxObserver`` attaches to the collector's ``Observers`` (collector/ledger/observers.py)
like any other observer of committed data; a sink failure never fails the ledger write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from collector.influx.settings import InfluxSettings
from collector.ledger.observers import StoredBatch
from collector.ledger.store import Ledger, LedgerWrite
from collector.metrics.catalogue import (
    INFLUX,
    INFLUX_DROPPED,
    INFLUX_ENQUEUED,
    INFLUX_QUEUE,
    INFLUX_WRITE_FAILURES,
    INFLUX_WRITTEN,
)
from collector.metrics.exporter import family, filled
from gpufleet.settings import ConfigError, read_secret

if TYPE_CHECKING:  # the sink needs influxdb-client, an optional dependency
    from collector.influx.sink import InfluxSink

log = logging.getLogger(__name__)


class InfluxObserver:
    """A ``LedgerObserver`` that queues what the ledger made durable to ``sink``: each
    newly acknowledged batch (raw samples) and the (hour, workload) rollups each commit
    touched. It only enqueues; the sink's failures are its own."""

    def __init__(self, sink: InfluxSink) -> None:
        self.sink = sink

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        for item in stored:
            try:
                self.sink.add_batch(item.record.body, item.record.sample_count)
            except Exception:  # one batch the sink cannot take must not cost the others
                log.exception("influx sink: cannot queue a batch")

    def write_committed(self, write: LedgerWrite) -> None:
        if write.workload_usage:
            self.sink.add_rollups(list(write.workload_usage))


class InfluxSinkMetrics:
    """Prometheus collector for the sink's own counters, built fresh on every scrape."""

    def __init__(self, sink: InfluxSink) -> None:
        self._sink = sink

    def describe(self) -> Iterable[Metric]:
        return [family(spec) for spec in INFLUX]

    def collect(self) -> Iterable[Metric]:
        c = self._sink.counters()
        dropped: dict[tuple[str, ...], float] = {
            (reason,): float(c.dropped.get(reason, 0))
            for reason in {"overflow", "rejected", *c.dropped}
        }
        return [
            filled(INFLUX_ENQUEUED, {(): c.enqueued}),
            filled(INFLUX_WRITTEN, {(): c.written}),
            filled(INFLUX_DROPPED, dropped),
            filled(INFLUX_WRITE_FAILURES, {(): c.write_failures}),
            filled(INFLUX_QUEUE, {(): c.queued}),
        ]


def build_influx_sink(settings: InfluxSettings, ledger: Ledger, currency: str) -> InfluxSink:
    """The real sink for ``settings`` (enabled), reading rollups from ``ledger``; not started."""
    try:
        from collector.influx.sink import InfluxSink
        from collector.influx.writer import InfluxWriter
    except ImportError as err:
        raise ConfigError(
            "influx.url is set but influxdb-client is not installed "
            "(pip install 'gpufleet[influx]')"
        ) from err
    token = read_secret(settings.token, settings.token_file, "influx.token") or ""
    return InfluxSink(InfluxWriter(settings, token), settings, ledger.usage_by_workload, currency)
