"""``gpufleet collector``: the fleet's brain: ingest, analytics, ledger, API, /metrics."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from prometheus_client.registry import Collector as PromCollector
from starlette.applications import Starlette

from agent.config import AgentSettings
from collector.accounting.rates import Rates
from collector.analysis.carbon import HourlyFeed, IntensityTable
from collector.analysis.cost import PriceBook
from collector.cluster.keeper import LeaseKeeper, connector
from collector.cluster.leader import LEADER
from collector.cluster.outbox_claims import Holder
from collector.cluster.settings import replica_name
from collector.config import CollectorSettings
from collector.http.app import create_app
from collector.http.auth import Gate, Token, load_tokens
from collector.http.savings import savings_routes
from collector.http.views import ViewCache
from collector.influx.hooks import InfluxObserver, InfluxSinkMetrics, build_influx_sink
from collector.kube.metrics import KubeReaderMetrics
from collector.ledger import pg_guard
from collector.ledger.store import Ledger
from collector.metrics.cache import Exposition, Refresh
from collector.metrics.exporter import RatesExporter
from collector.metrics.replica_scope import LeaderOnly, MetricScope, ReplicaExporter
from collector.metrics.savings import SavingsExporter
from collector.replica_core import build_replica_core
from collector.replicas import ShardedApplier
from collector.reports import LiveRates
from collector.savings_report import savings_report
from collector.service import CollectorCore
from collector.web import ConsoleSources, SeriesBuffer, console_routes
from collector.web.plans_routes import plans_exporter, plans_routes
from gpufleet.cli.alerting import Alerting, build_alerting
from gpufleet.cli.kube_metadata import start_metadata
from gpufleet.cli.listen import check_free
from gpufleet.cli.report_mail import ReportMailer
from gpufleet.cli.schedule import PeriodicJobs
from gpufleet.settings import load_settings

if TYPE_CHECKING:
    from collector.influx.sink import InfluxSink
    from collector.kube.watcher import MetadataWatcher

log = logging.getLogger("gpufleet.collector")

#: how often (wall seconds) evaluation (when due) and alerting run; applying has its own
#: setting, ingest.apply_interval_seconds (one commit's cost grows with the GPUs it
#: touches, not the samples: bench/collector_throughput.py)
CHECK_EVERY_SECONDS = 5.0
PRUNE_EVERY_SECONDS = 6 * 3600.0
#: how often the efficiency reports look whether a period ended
REPORTS_EVERY_SECONDS = 60.0
#: how young a cached read view (/v1/fleet, the console's) is served though the fleet
#: changed since: a fleet at 1 Hz changes with every batch (collector/http/views.py); 5 s,
#: a third of the console's and a typical poller's 15 s, so each of them sees fresh data
VIEW_REFRESH_SECONDS = 5.0


def add_parser(commands: Any) -> None:
    p = commands.add_parser("collector", help="run the collector", description=__doc__)
    p.add_argument("--config", type=Path, help="YAML settings file")
    p.add_argument("--host", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default 8080)")
    p.add_argument(
        "--ledger",
        "--db",
        dest="db",
        help="ledger URL: a SQLite file path (default gpufleet.db) or postgresql://...",
    )
    p.set_defaults(run=run)


def settings_from_args(args: argparse.Namespace) -> CollectorSettings:
    overrides = {"server.host": args.host, "server.port": args.port, "ledger.url": args.db}
    return load_settings(
        CollectorSettings, args.config, dict(os.environ), overrides, foreign=(AgentSettings,)
    )


@dataclass
class Collector:
    """Every long-lived object of one collector process."""

    settings: CollectorSettings
    ledger: Ledger
    #: ingest, live fleet, applier, recommender, observers and the backend the app sees
    core: CollectorCore
    app: Starlette
    #: apply, evaluate, alerting, retention: each on its own thread (schedule.py)
    scheduler: PeriodicJobs
    #: the optional InfluxDB sink (settings.influx); its counters on /metrics
    influx: InfluxSink | None = None
    #: chat notifications and auto-release (settings.notifications, settings.actions)
    alerting: Alerting | None = None
    clock: Callable[[], float] = time.time
    #: /metrics' body, rendered again when applying or a commit changed what it shows
    exposition: Exposition | None = None
    #: efficiency reports per user and team (settings.reports; report_mail.py)
    reports: ReportMailer | None = None
    #: a replica's shard and leader leases (a PostgreSQL ledger; None: one collector)
    keeper: LeaseKeeper | None = None
    #: the Kubernetes metadata watches (settings.kubernetes), None when off
    kube: MetadataWatcher | None = None
    #: on PostgreSQL, the lock that keeps one collector, or replicas, on the ledger
    guard: pg_guard.LedgerGuard | None = None

    def leads(self) -> bool:
        """Whether fleet-wide work runs here: always for one collector; on the leader
        (fresh lease) for a replica."""
        return self.keeper is None or _leads(self.keeper)

    def start_jobs(
        self,
        apply_every_seconds: float | None = None,
        check_every_seconds: float = CHECK_EVERY_SECONDS,
    ) -> None:
        """Start applying (every ``ingest.apply_interval_seconds`` unless given),
        recommendation evaluation, alerting and retention, each on its own schedule."""
        apply_every = apply_every_seconds or self.settings.ingest.apply_interval_seconds
        jobs: list[tuple[Callable[[], object], float, str]] = [
            (self.apply, apply_every, "apply"),
            (self.evaluate, check_every_seconds, "evaluate"),
            (self.prune, PRUNE_EVERY_SECONDS, "prune"),
        ]
        if self.alerting is not None:
            jobs.append((self.alert, check_every_seconds, "alerting"))
        if self.reports is not None:
            jobs.append((self.reports.tick, REPORTS_EVERY_SECONDS, "reports"))
        for func, seconds, name in jobs:
            self.scheduler.add(name, func, seconds)
        self.scheduler.start()

    def apply(self) -> int:
        """One apply tick (commits when due); /metrics renders again when it applied."""
        applied = self.core.applier.tick()
        if applied and self.exposition is not None:
            self.exposition.changed(Refresh.APPLY)
        return applied

    def evaluate(self) -> None:
        """Recommendations when due (on the leader only, with replicas)."""
        if self.leads():
            self.core.recommender.evaluate_if_due()

    def alert(self) -> None:
        """Recommendation changes to chat, one auto-release pass, delivery (on the
        leader only, with replicas)."""
        if self.alerting is not None and self.leads():
            now = self.clock()
            recs = self.core.service.recommendations(None)
            self.alerting.step(self.core.service.fleet(now), recs, now)

    def prune(self) -> None:
        removed = self.ledger.prune(self.clock(), self.settings.ledger.retention_days)
        log.info("retention: %d old rows removed", removed)

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        if self.kube is not None:
            self.kube.close()
        self.core.close()
        self.core.applier.tick(flush=True)
        if self.keeper is not None:  # applied what it held: others take its shards now
            self.keeper.stop()
        if self.influx is not None:  # drains what it can before the ledger closes
            self.influx.close()
        self.ledger.close()
        if self.guard is not None:
            self.guard.close()


def build_collector(
    settings: CollectorSettings,
    clock: Callable[[], float] = time.time,
    tokens: Collection[str | Token] | None = None,
    series_charts: bool = True,
) -> Collector:
    """Wire the real objects: ledger, price book, carbon table, the core, app.
    ``series_charts`` False leaves the console's per-GPU charts empty (they cost ~29 KB per
    GPU and a fold per sample): the throughput benchmark measures the core alone."""
    prices = (
        PriceBook.load(settings.pricing.price_book)
        if settings.pricing.price_book is not None
        else PriceBook.example()
    )
    table = IntensityTable.default()
    feed = (
        HourlyFeed.load(settings.carbon.intensity_feed, table, settings.carbon.region)
        if settings.carbon.intensity_feed is not None
        else None
    )
    rates = Rates(prices, table, settings.carbon, feed)
    ledger, influx = _open_ledger(settings, rates.currency)
    guard = _take_guard(settings, ledger)
    keeper = _start_keeper(settings, ledger)
    enricher, kube = start_metadata(settings.kubernetes)
    core = (
        CollectorCore.build(settings, ledger, rates, clock, enricher)
        if keeper is None
        else build_replica_core(settings, ledger, rates, lambda: keeper.state, clock, enricher)
    )
    if influx is not None:
        core.observers.attach(InfluxObserver(influx))
    # one gate for every guarded route: one failure limit per client address
    gate = Gate.of(tokens if tokens is not None else load_tokens(settings.server), settings.server)
    series = SeriesBuffer()  # recent per-GPU samples for the console's charts
    if series_charts:
        core.observers.attach(series)
    console = ConsoleSources(core.service, ledger, prices, rates.currency, series)
    alerting = build_alerting(
        settings, ledger, clock, gate, fleet=core.service.fleet,
        leader=_leader_holder(keeper) if keeper is not None else None,
    )  # fmt: skip
    views = ViewCache(clock, refresh_seconds=VIEW_REFRESH_SECONDS)  # the API's and console's
    exposition = Exposition(clock, settings.ingest.apply_interval_seconds)
    # the fleet views the app's FleetExporter reads too (create_app): one call per render
    fleet_views = exposition.once_per_render(core.service.fleet)
    live_rates = LiveRates(fleet_views, rates, core.fleet.node_labels)
    core.observers.attach(exposition)  # a commit changes what /metrics shows
    scope = _metric_scope(keeper, core) if keeper is not None else None
    app = create_app(
        core.service,
        settings,
        gate,
        clock,
        extra_routes=[
            # the answers' /ui/answer before the console's own 404 for any other /ui/ path
            *(alerting.routes if alerting is not None else []),
            *plans_routes(ledger, prices, settings, gate, clock),
            *savings_routes(ledger, settings, rates.currency, gate, clock),
            *console_routes(console, settings, gate, clock, views),
        ],
        collectors=[
            *_fleet_wide(
                [
                    RatesExporter(live_rates, clock),
                    plans_exporter(ledger, prices, settings, clock),
                    SavingsExporter(
                        partial(savings_report, ledger, currency=rates.currency), clock
                    ),
                ],
                scope,
            ),
            *([InfluxSinkMetrics(influx)] if influx is not None else []),
            *([alerting.exporter] if alerting is not None and alerting.exporter else []),
            *([KubeReaderMetrics(kube.store, kube.watches)] if kube is not None else []),
            *([ReplicaExporter(lambda: keeper.state)] if keeper is not None else []),
        ],
        views=views,
        exposition=exposition,
        scope=scope,
        pod_labels=enricher.pod_labels,
    )
    if influx is not None:
        influx.start()
    scheduler = PeriodicJobs()
    reports = None
    if settings.reports.users or settings.reports.teams:
        announce = alerting.notifier.announce if alerting and alerting.notifier else None
        reports = ReportMailer(settings, ledger, rates.currency, announce, clock)
    return Collector(
        settings, ledger, core, app, scheduler, influx, alerting, clock, exposition, reports,
        keeper, kube, guard,
    )  # fmt: skip


def _take_guard(settings: CollectorSettings, ledger: Ledger) -> pg_guard.LedgerGuard | None:
    """On PostgreSQL, the ledger's lock (pg_guard.py): one collector, or replicas; a
    second way of applying it refuses to start (the ledger closed)."""
    if ledger.dialect != "postgresql":
        return None
    try:
        return pg_guard.take(settings.ledger.url, replica=settings.cluster.enabled)
    except BaseException:
        ledger.close()
        raise


def _start_keeper(settings: CollectorSettings, ledger: Ledger) -> LeaseKeeper | None:
    """A replica's lease keeper, started, after its first renewal (or a lease's wait for
    it); None for one collector (SQLite, or ``cluster.enabled`` false)."""
    cluster = settings.cluster
    if ledger.dialect != "postgresql" or not cluster.enabled:
        return None
    keeper = LeaseKeeper(cluster, replica_name(cluster), connector(settings.ledger.url, cluster))
    keeper.start()
    deadline = time.monotonic() + cluster.lease_seconds
    while keeper.state.renewed_at is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return keeper


def _leads(keeper: LeaseKeeper) -> bool:
    state = keeper.state
    return state.leader and state.fresh(time.monotonic())


def _metric_scope(keeper: LeaseKeeper, core: CollectorCore) -> MetricScope:
    """A replica's share of /metrics: per-GPU series of its shards, fleet-wide on the
    leader (collector/metrics/replica_scope.py)."""
    assert isinstance(core.applier, ShardedApplier)
    return MetricScope(partial(_leads, keeper), core.applier.owned_views)


def _fleet_wide(collectors: list[PromCollector], scope: MetricScope | None) -> list[PromCollector]:
    """Fleet-wide collectors: on a replica, on the leader only."""
    if scope is None:
        return collectors
    return [LeaderOnly(c, scope.leads) for c in collectors]


def _leader_holder(keeper: LeaseKeeper) -> Callable[[], Holder | None]:
    """Who sends notifications now: this replica under its leader epoch while its lease
    is fresh, else nobody here."""

    def holder() -> Holder | None:
        state = keeper.state
        if state.leader_epoch is None or not state.fresh(time.monotonic()):
            return None
        name = state.replica_id
        return Holder(f"{name}/notify", LEADER, name, state.leader_epoch)

    return holder


def _open_ledger(settings: CollectorSettings, currency: str) -> tuple[Ledger, InfluxSink | None]:
    """The ledger, and with ``influx.url`` set the sink that observes it (not attached)."""
    ledger = Ledger.open(
        settings.ledger.url,
        synchronous=settings.ledger.synchronous,
        shard_count=settings.cluster.shard_count,
    )
    if not settings.influx.enabled:
        return ledger, None
    try:
        return ledger, build_influx_sink(settings.influx, ledger, currency)
    except BaseException:
        ledger.close()
        raise


def http_config(app: Starlette, settings: CollectorSettings, **options: Any) -> uvicorn.Config:
    """uvicorn's settings for the collector's app. h11 rather than httptools: h11 bounds
    the request line and headers it buffers (``server.max_header_bytes``; past it the
    request is answered 400 and the connection closed), httptools buffers any size."""
    return uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        lifespan="off",
        http="h11",
        h11_max_incomplete_event_size=settings.server.max_header_bytes,
        **options,
    )


def serve(collector: Collector, stop: threading.Event | None = None) -> uvicorn.Server:
    """Run the HTTP server in a background thread; returns it (``should_exit`` stops it)."""
    server = uvicorn.Server(http_config(collector.app, collector.settings, log_level="warning"))
    thread = threading.Thread(target=server.run, name="http", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError(
            f"collector could not listen on {collector.settings.server.host}:"
            f"{collector.settings.server.port}"
        )
    return server


#: CPython's garbage-collector thresholds for a collector process. With the default (700,
#: 10, 10) a young-generation collection runs every ~70 GPU-samples (each leaves ~10 objects
#: that die young), and everything a tick holds at that moment is promoted, until the old
#: generation fills and a full collection walks the whole heap: ~7 % of the CPU at 10,000
#: GPUs in bench/collector_throughput.py, ~1 % with these. Nothing the collector builds per
#: sample is part of a reference cycle; the young generation only holds more garbage
#: (at most this many objects) between collections.
GC_THRESHOLDS = (50_000, 20, 10)


def tune_gc() -> tuple[int, int, int]:
    """Set ``GC_THRESHOLDS`` for this process; returns the thresholds it had."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    return before


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    host, port = settings.server.host, settings.server.port
    check_free(host, {port: "the collector's API and /metrics"},
               "another collector running? set --port or server.port")  # fmt: skip
    tune_gc()
    collector = build_collector(settings)
    collector.start_jobs()
    # collector.http.app logs each request (without tokens)
    server = uvicorn.Server(http_config(collector.app, settings, access_log=False))
    log.info("collector on http://%s:%d", settings.server.host, settings.server.port)
    # uvicorn handles SIGTERM/SIGINT while it runs, then restores these handlers and
    # re-raises the signal it caught; with the defaults that would kill the process
    # before stop() applies the held-back samples.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    try:
        server.run()
    finally:
        collector.stop()
    return 0
