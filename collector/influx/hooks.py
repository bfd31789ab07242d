"""Where the InfluxDB sink meets the collector: a mirroring ledger and the sink's metrics.

``MirroredLedger`` is the ledger that also hands the sink what it has just made durable:
each newly acknowledged batch (raw samples, at ingest) and the (hour, workload) rollups
each commit touched. It only enqueues, after the ledger call succeeded, and a sink
failure never fails the ledger call: the collector's own results do not depend on it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from collector.influx.settings import InfluxSettings
from collector.ledger.store import BatchRecord, Ledger, LedgerWrite
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


class MirroredLedger(Ledger):
    """A ``Ledger`` whose new batches and commits are also queued to ``sink`` (set it
    after ``open``; None mirrors nothing)."""

    sink: InfluxSink | None = None

    @classmethod
    def open_mirrored(cls, url: str, *, synchronous: str = "FULL") -> MirroredLedger:
        ledger = cls.open(url, synchronous=synchronous)
        assert isinstance(ledger, MirroredLedger)
        return ledger

    def record_batches(self, records: Sequence[BatchRecord]) -> list[int | None]:
        batch_ids = super().record_batches(records)
        sink = self.sink
        for record, batch_id in zip(records, batch_ids, strict=True):
            if batch_id is None or sink is None:
                continue
            try:
                sink.add_batch(record.body, record.sample_count)
            except Exception:  # the sink is optional; the ack is not
                log.exception("influx sink: cannot queue a batch")
        return batch_ids

    def commit(self, write: LedgerWrite) -> None:
        super().commit(write)
        if self.sink is not None and write.workload_usage:
            try:
                self.sink.add_rollups(list(write.workload_usage))
            except Exception:
                log.exception("influx sink: cannot queue rollups")


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
