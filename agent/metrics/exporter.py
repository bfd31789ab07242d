"""The node-local Prometheus exporter: a prometheus_client custom collector.

Every scrape builds fresh metric families from the catalogue (agent/metrics/catalogue.py) and the
sampler's latest state (each GPU's rows: agent/metrics/gpu_readings.py), so a GPU or workload
that vanished simply stops appearing. A value of ``None`` emits no sample (never 0). One bad
GPU or field never fails a scrape: that series is skipped, logged once and counted in
``gpufleet_agent_export_errors_total``.

Wiring (the CLI does this)::

    registry = CollectorRegistry(auto_describe=True)
    registry.register(AgentExporter(node, sampler.latest, stats, dcgm_compat=True))
    server, thread = serve_metrics(registry, "0.0.0.0", 9835)
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from agent import __version__
from agent.metrics.catalogue import AGENT_METRICS, GPU_METRICS
from agent.metrics.dcgm import DcgmInput, dcgm_descriptions, dcgm_families, shared_gpu_inputs
from agent.metrics.dcgm_naming import DcgmNaming, dcgm_specs
from agent.metrics.families import FamilySet, new_family
from agent.metrics.gpu_readings import ScrapedGpu, gpu_readings
from agent.metrics.host_catalogue import HOST_METRICS, host_rows, workloads_by_key
from agent.metrics.workload_labels import primary_workload
from agent.model import GpuInfo, GpuSample, WorkloadHostSample
from agent.stats import AgentStats, StatsSnapshot

log = logging.getLogger(__name__)

Snapshot = Callable[[], tuple[Sequence[GpuInfo], Sequence[GpuSample]]]
HostSnapshot = Callable[[], Sequence[WorkloadHostSample]]


class XidTally:
    """XID events per GPU since the agent started, counted from every sample observed.

    ``observe`` ignores a sample whose timestamp is not newer than the last one seen for its
    GPU, so it is idempotent: the sampler may call it for every sample it takes (no XID is
    lost between scrapes) and the exporter calls it again for the latest samples at each
    scrape (which covers a sampler that does not) without counting anything twice.
    Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_timestamp: dict[str, float] = {}
        self._counts: Counter[tuple[str, int]] = Counter()
        self._last_xid: dict[str, int] = {}

    def observe(self, sample: GpuSample) -> None:
        with self._lock:
            seen = self._last_timestamp.get(sample.gpu_uuid)
            if seen is not None and sample.timestamp <= seen:
                return
            self._last_timestamp[sample.gpu_uuid] = sample.timestamp
            for xid in sample.xid_errors:
                self._counts[(sample.gpu_uuid, xid)] += 1
                self._last_xid[sample.gpu_uuid] = xid

    def counts(self, gpu_uuid: str) -> dict[int, int]:
        """XID code -> events seen for one GPU."""
        with self._lock:
            return {xid: n for (uuid, xid), n in self._counts.items() if uuid == gpu_uuid}

    def last_xid(self, gpu_uuid: str) -> int | None:
        """The latest XID code seen for a GPU; None when it has had none since start."""
        with self._lock:
            return self._last_xid.get(gpu_uuid)


class AgentExporter(Collector):
    """Exports the latest sample of every GPU and the agent's own health figures.

    ``snapshot()`` returns the current GpuInfo list and the latest sample per GPU (the
    sampler owns that state; it must be cheap and thread-safe). With ``dcgm_compat`` the
    exporter also emits dcgm-exporter names (agent/metrics/dcgm.py), in its 4.8.x naming (the
    default: NVIDIA's dashboard queries it) or, with ``dcgm_naming="4.9"``, its 4.9 one
    (agent/metrics/dcgm_naming.py). Pass the
    sampler's ``xid_tally`` when it observes every sample; otherwise XIDs are counted from
    the samples seen at scrapes only. ``hosts()`` returns the latest per-workload host
    samples (the sampler's ``host_snapshot``), exported as ``gpufleet_workload_host_*``.
    """

    def __init__(
        self,
        node: str,
        snapshot: Snapshot,
        stats: AgentStats,
        dcgm_compat: bool = False,
        xid_tally: XidTally | None = None,
        dcgm_naming: DcgmNaming = "4.8",
        hosts: HostSnapshot | None = None,
    ) -> None:
        self._node = node
        self._snapshot = snapshot
        self._hosts = hosts
        self._stats = stats
        self._dcgm_compat = dcgm_compat
        self._dcgm_specs = dcgm_specs(dcgm_naming)
        self._xids = xid_tally if xid_tally is not None else XidTally()
        self._errors_lock = threading.Lock()
        self._export_errors: Counter[tuple[str, str]] = Counter()

    def describe(self) -> Iterable[Metric]:
        """Empty families, so registering never calls ``snapshot()``."""
        families = [new_family(spec) for spec in GPU_METRICS + AGENT_METRICS + HOST_METRICS]
        if self._dcgm_compat:
            families.extend(dcgm_descriptions(self._dcgm_specs))
        return families

    def collect(self) -> Iterable[Metric]:
        views = self._views()
        families = FamilySet(GPU_METRICS)
        for view in views:
            self._add_gpu(families, view)
        yield from families.metrics()
        yield from self._host_families(views)
        if self._dcgm_compat:
            inputs = self._dcgm_inputs(views)
            yield from dcgm_families(self._node, inputs, self._count_error, self._dcgm_specs)
        yield from self._agent_families(self._stats.snapshot())

    def _views(self) -> list[ScrapedGpu]:
        try:
            infos, samples = self._snapshot()
        except Exception:
            self._count_error("", "snapshot")
            return []
        by_uuid = {sample.gpu_uuid: sample for sample in samples}
        for sample in samples:
            self._xids.observe(sample)
        known = {info.uuid for info in infos}
        for uuid in by_uuid.keys() - known:
            self._count_error(uuid, "gpufleet_gpu_info")
        return [self._view(info, by_uuid.get(info.uuid)) for info in infos]

    def _view(self, info: GpuInfo, sample: GpuSample | None) -> ScrapedGpu:
        workloads = sample.workloads if sample is not None else ()
        return ScrapedGpu(
            node=self._node,
            info=info,
            sample=sample,
            workload=primary_workload(workloads),
            xid_counts=self._xids.counts(info.uuid),
        )

    def _add_gpu(self, families: FamilySet, view: ScrapedGpu) -> None:
        for spec in GPU_METRICS:
            try:
                rows = [(labels, float(value)) for labels, value in gpu_readings(spec, view)]
            except Exception:
                self._count_error(view.info.uuid, spec.name)
                continue
            for labels, value in rows:
                try:
                    if not math.isfinite(value):
                        raise ValueError(f"{spec.name}: not a finite number: {value}")
                    families.add(spec.name, labels, value)
                except ValueError:
                    self._count_error(view.info.uuid, spec.name)

    def _host_families(self, views: Sequence[ScrapedGpu]) -> list[Metric]:
        """One series per host sample whose workload holds a GPU in this scrape."""
        if self._hosts is None:
            return []
        try:
            hosts = self._hosts()
        except Exception:
            self._count_error("", "host_snapshot")
            return []
        workloads = workloads_by_key([v.sample.workloads for v in views if v.sample is not None])
        families = FamilySet(HOST_METRICS)
        for host in hosts:
            try:
                for name, labels, value in host_rows(self._node, host, workloads):
                    if math.isfinite(value):
                        families.add(name, labels, value)
            except (KeyError, ValueError):
                self._count_error("", "gpufleet_workload_host")
        return families.metrics()

    def _dcgm_inputs(self, views: Sequence[ScrapedGpu]) -> list[DcgmInput]:
        by_uuid = {view.info.uuid: view.info for view in views}
        return [
            per_workload
            for view in views
            if view.sample is not None
            for per_workload in shared_gpu_inputs(
                DcgmInput(
                    info=view.info,
                    parent=by_uuid.get(view.info.mig_parent_uuid or ""),
                    sample=view.sample,
                    workload=view.workload,
                    last_xid=self._xids.last_xid(view.info.uuid),
                )
            )
        ]

    def _agent_families(self, snap: StatsSnapshot) -> list[Metric]:
        node = (self._node,)
        scalars: dict[str, float] = {
            "gpufleet_agent_info": 1,
            "gpufleet_agent_reads_total": snap.reads_total,
            "gpufleet_agent_read_seconds_total": snap.read_seconds_total,
            "gpufleet_agent_last_read_seconds": snap.last_read_seconds,
            "gpufleet_agent_batches_sent_total": snap.batches_sent_total,
            "gpufleet_agent_batches_failed_total": snap.batches_failed_total,
            "gpufleet_agent_samples_sent_total": snap.samples_sent_total,
            "gpufleet_agent_spool_bytes": snap.spool_bytes,
            "gpufleet_agent_spool_batches": snap.spool_batches,
            "gpufleet_agent_spool_dropped_batches_total": snap.spool_dropped_batches_total,
            "gpufleet_agent_spool_dropped_samples_total": snap.spool_dropped_samples_total,
            "gpufleet_agent_unhealthy_gpus": snap.unhealthy_gpus,
            "gpufleet_agent_batches_split_total": snap.batches_split_total,
            "gpufleet_agent_samples_late_total": snap.samples_late_total,
            "gpufleet_agent_collector_retry_after_seconds": snap.retry_after_seconds,
            "gpufleet_agent_memory_batches": snap.memory_batches,
        }
        families = FamilySet(AGENT_METRICS)
        for name, value in scalars.items():
            labels = (*node, __version__) if name == "gpufleet_agent_info" else node
            families.add(name, labels, float(value))
        for name, by_reason in (
            ("gpufleet_agent_batches_held_total", snap.batches_held_total),
            ("gpufleet_agent_batches_refused_total", snap.batches_refused_total),
        ):
            for reason, count in sorted(by_reason.items()):
                families.add(name, (*node, reason), count)
        for (uuid, field), count in sorted(snap.field_errors_total.items()):
            families.add("gpufleet_agent_field_errors_total", (*node, uuid, field), count)
        with self._errors_lock:
            errors = sorted(self._export_errors.items())
        for (uuid, metric), count in errors:
            families.add("gpufleet_agent_export_errors_total", (*node, uuid, metric), count)
        return families.metrics()

    def _count_error(self, gpu_uuid: str, metric: str) -> None:
        with self._errors_lock:
            self._export_errors[(gpu_uuid, metric)] += 1
            first = self._export_errors[(gpu_uuid, metric)] == 1
        if first:
            log.warning("cannot export %s for GPU %r; skipping it", metric, gpu_uuid, exc_info=True)


def serve_metrics(
    registry: CollectorRegistry, address: str, port: int
) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``registry`` on http://address:port/metrics from a daemon thread.

    Returns the server and its thread; stop with ``server.shutdown(); server.server_close()``.
    Port 0 picks a free port (``server.server_port`` tells which). Content negotiation
    (OpenMetrics or text 0.0.4) and gzip are prometheus_client's.
    """
    return start_http_server(port, addr=address, registry=registry)


__all__ = ["AgentExporter", "HostSnapshot", "Snapshot", "XidTally", "serve_metrics"]
