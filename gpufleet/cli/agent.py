"""``gpufleet agent``: read this node's GPUs, export /metrics, ship batches to the collector."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec

from agent.config import AgentSettings
from agent.sampler import Sampler
from agent.sources.interface import GpuSource, SourceError
from agent.stats import AgentStats
from collector.config import CollectorSettings
from gpufleet.settings import ConfigError, load_settings

log = logging.getLogger("gpufleet.agent")


def add_parser(commands: Any) -> None:
    p = commands.add_parser("agent", help="run the node agent", description=__doc__)
    p.add_argument("--config", type=Path, help="YAML settings file")
    p.add_argument("--source", choices=["nvml", "simulated", "replay"])
    p.add_argument("--trace", type=Path, help="trace file for --source replay")
    p.add_argument("--node", help="node name (default: $NODE_NAME or the host name)")
    p.add_argument("--metrics-port", type=int, help="Prometheus /metrics port (0 = off)")
    p.add_argument("--collector", help="collector URL, e.g. http://collector:8080")
    p.add_argument("--spool-dir", type=Path, help="where unacknowledged batches wait")
    p.add_argument("--no-ship", action="store_true", help="export only, ship nothing")
    p.add_argument("--dcgm-compat", action="store_true", help="also export dcgm-exporter names")
    p.add_argument(
        "--dcgm-naming",
        choices=["4.8", "4.9"],
        help="dcgm-exporter naming (default 4.8, what NVIDIA's dashboard queries)",
    )
    p.add_argument("--once", action="store_true", help="read every GPU once, print JSON, exit")
    p.set_defaults(run=run)


def settings_from_args(args: argparse.Namespace, environ: dict[str, str]) -> AgentSettings:
    overrides: dict[str, Any] = {
        "source.kind": args.source,
        "source.replay_path": str(args.trace) if args.trace else None,
        "node.name": args.node,
        "exporter.port": args.metrics_port,
        "shipper.url": args.collector,
        "shipper.spool_dir": str(args.spool_dir) if args.spool_dir else None,
    }
    if args.metrics_port == 0:
        overrides["exporter.enabled"] = False
        overrides["exporter.port"] = None
    if args.no_ship:
        overrides["shipper.enabled"] = False
    if args.dcgm_compat:
        overrides["exporter.dcgm_compat"] = True
    if args.dcgm_naming:
        overrides["exporter.dcgm_naming"] = args.dcgm_naming
    return load_settings(
        AgentSettings, args.config, environ, overrides, foreign=(CollectorSettings,)
    )


def node_name(settings: AgentSettings, environ: dict[str, str]) -> str:
    return settings.node.name or environ.get("NODE_NAME") or socket.gethostname()


def open_source(settings: AgentSettings, node: str, stats: AgentStats) -> GpuSource:
    kind = settings.source.kind
    if kind == "simulated":
        from agent.sources.simulated.source import SimulatedNode

        return SimulatedNode.from_settings(node, settings.source)
    if kind == "replay":
        from agent.sources.replay.source import ReplaySource

        if settings.source.replay_path is None:
            raise ConfigError("source.replay_path: required with --source replay (use --trace)")
        # shifted so the trace's first point is now: a recorded trace is years old
        return ReplaySource.from_settings(node, settings.source)
    from agent.sources.nvml.source import NvmlSource

    return NvmlSource(settings.source, stats=stats)


def run(args: argparse.Namespace) -> int:
    environ = dict(os.environ)
    settings = settings_from_args(args, environ)
    node = node_name(settings, environ)
    stats = AgentStats()
    try:
        source = open_source(settings, node, stats)
        source.discover()  # fail now, clearly, rather than in the sampling loop
    except SourceError as err:
        print(f"gpufleet agent: cannot read GPUs: {err}", file=sys.stderr)
        return 1
    try:
        if args.once:
            return print_once(source, settings)
        return serve(source, settings, node, stats, environ)
    finally:
        source.close()


def print_once(source: GpuSource, settings: AgentSettings) -> int:
    """Like ``nvidia-smi -q`` for our model: every GPU's identity and one sample, as JSON."""
    sampler = Sampler(source, AgentStats(), settings.source.interval_seconds, _annotator(settings))
    samples = sampler.tick()
    gpus, _ = sampler.snapshot()
    by_uuid = {s.gpu_uuid: s for s in samples}
    report = [
        {"gpu": msgspec.to_builtins(g), "sample": msgspec.to_builtins(by_uuid.get(g.uuid))}
        for g in gpus
    ]
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _annotator(settings: AgentSettings, stats: AgentStats | None = None, procs: Any = None) -> Any:
    from agent.attribution.attributor import Attributor

    return Attributor(settings.attribution, stats, procs=procs)


def _attribution(settings: AgentSettings, source: GpuSource, stats: AgentStats) -> tuple[Any, Any]:
    """The annotator and the host reader: the simulator's own host readings; on NVML each
    workload's cgroup (``attribution.host_usage``), sharing the annotator's /proc reader;
    none for a replayed trace (its processes are not this host's)."""
    if settings.source.kind == "simulated":
        return _annotator(settings, stats), source
    attribution = settings.attribution
    if settings.source.kind == "replay" or not attribution.host_usage:
        return _annotator(settings, stats), None
    from agent.attribution.host_usage import CgroupHostReader
    from agent.attribution.proc import ProcReader

    procs = ProcReader(attribution.proc_root, attribution.refresh_seconds)
    hosts = CgroupHostReader(procs, attribution.cgroup_root, stats, attribution.refresh_seconds)
    return _annotator(settings, stats, procs), hosts


def serve(
    source: GpuSource,
    settings: AgentSettings,
    node: str,
    stats: AgentStats,
    environ: dict[str, str],
) -> int:
    stop = threading.Event()
    shipper = _shipper(settings, node, stats)
    annotator, hosts = _attribution(settings, source, stats)
    from agent.metrics.exporter import XidTally

    tally = XidTally()
    sampler = Sampler(
        source,
        stats,
        settings.source.interval_seconds,
        annotator,
        shipper,
        observers=[tally],
        hosts=hosts,
    )
    if settings.exporter.enabled:
        _start_exporter(settings, node, sampler, stats, tally)
    threads = [threading.Thread(target=sampler.run, args=(stop,), name="sampler", daemon=True)]
    if shipper is not None:
        threads.append(
            threading.Thread(target=shipper.run, args=(stop,), name="shipper", daemon=True)
        )
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    for thread in threads:
        thread.start()
    log.info("agent on %s: source=%s ship=%s", node, settings.source.kind, shipper is not None)
    stop.wait()
    for thread in threads:
        thread.join(timeout=10)
    if shipper is not None:
        shipper.close()  # flushes what is buffered into the spool
    annotator.close()
    log.info("agent stopped")
    return 0


def _shipper(settings: AgentSettings, node: str, stats: AgentStats) -> Any:
    if not settings.shipper.enabled:
        return None
    if settings.shipper.url is None:
        raise ConfigError("shipper.url: required unless --no-ship (use --collector URL)")
    from agent.shipper import Shipper

    return Shipper(settings.shipper, node, stats, node_labels=settings.node.labels)


def _start_exporter(
    settings: AgentSettings, node: str, sampler: Sampler, stats: AgentStats, tally: Any
) -> None:
    from prometheus_client import CollectorRegistry

    from agent.metrics.exporter import AgentExporter, serve_metrics

    registry = CollectorRegistry(auto_describe=True)
    exporter = AgentExporter(
        node,
        sampler.snapshot,
        stats,
        settings.exporter.dcgm_compat,
        xid_tally=tally,
        dcgm_naming=settings.exporter.dcgm_naming,
        hosts=sampler.host_snapshot,
    )
    registry.register(exporter)
    serve_metrics(registry, settings.exporter.address, settings.exporter.port)
    log.info("metrics on http://%s:%d/metrics", settings.exporter.address, settings.exporter.port)
