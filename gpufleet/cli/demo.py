"""``gpufleet demo``: a collector with SQLite and a simulated fleet, in one process.

The simulated agents are the real agent code (sampler, shipper with its spool, exporter)
reading simulated GPUs, and they speak real HTTP to the real collector. Simulated time
runs up to ``--speed`` times faster than wall time, slower when the machine cannot carry
the fleet at that speed (demo_pace.py); before that, ``--history`` simulated hours are
pushed through as fast as they go, so there is something to see from the start.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from agent.config import AgentSettings, ShipperSettings
from agent.metrics.exporter import AgentExporter, XidTally, serve_metrics
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.skew import SkewedClock, SkewedNode
from agent.sources.simulated.source import SimulatedNode
from agent.stats import AgentStats
from collector.config import CollectorSettings, LedgerSettings
from collector.influx.settings import InfluxSettings
from gpufleet.cli.collector import build_collector, serve, tune_gc
from gpufleet.cli.demo_fleet import Demo, DemoAgent, Outage
from gpufleet.cli.demo_nodes import demo_fleet, node_clock_offset, outage_of
from gpufleet.cli.demo_pace import Pacer, SimClock
from gpufleet.cli.demo_view import print_summary, run_live
from gpufleet.cli.listen import check_free
from gpufleet.settings import ConfigError, load_settings

INFLUX_FLAGS = ("url", "org", "bucket", "database")


def add_parser(commands: Any) -> None:
    p = commands.add_parser("demo", help="collector + simulated fleet", description=__doc__)
    p.add_argument("--config", type=Path, help="collector settings YAML (notifications ...)")
    p.add_argument(
        "--speed",
        type=float,
        default=60.0,
        help="simulated seconds per second, at most (slower when the machine cannot keep up)",
    )
    p.add_argument("--port", type=int, default=8080, help="collector port (agents: port+1..)")
    p.add_argument("--duration", type=float, help="wall seconds to run, then print and exit")
    p.add_argument("--history", type=float, default=1.0, help="simulated hours to pre-run")
    p.add_argument("--nodes", type=at_least_one, default=4, help="simulated nodes")
    p.add_argument("--gpus-per-node", type=at_least_one, default=8, help="GPUs in each node")
    p.add_argument("--seed", type=int, default=0, help="the simulator's random seed")
    p.add_argument("--step", type=float, default=10.0, help="simulated seconds between samples")
    p.add_argument(
        "--db", help="ledger: a SQLite file (default: a temporary one) or postgresql://..."
    )
    p.add_argument("--plain", action="store_true", help="no live screen, just the summary")
    p.add_argument(
        "--mig", action="store_true", help="add a node of two H100s split into MIG slices"
    )
    p.add_argument(
        "--shared",
        action="store_true",
        help="add a node of two shared H100s: one time-sliced by three pods, one shared "
        "through HAMi by two pods that declared 30 %% and 50 %% of it",
    )
    p.add_argument(
        "--skew",
        type=float,
        metavar="SECONDS",
        help="add a node whose clock is SECONDS off the collector's (negative: behind)",
    )
    p.add_argument(
        "--outage",
        type=float,
        metavar="MINUTES",
        help="add a node cut off from the collector for MINUTES of simulated time, 5 "
        "simulated minutes into the live run; its spool holds its batches and drains after",
    )
    p.add_argument(
        "--spare",
        action="store_true",
        help="add a node of 8 A100s nobody uses (unallocated: a scale-down recommendation)",
    )
    p.add_argument(
        "--clone",
        action="store_true",
        help="add a VM cloned from the first node's image (same GPU uuids: refused, 409)",
    )
    influx = p.add_argument_group(
        "InfluxDB sink",
        "raw samples and hourly rollups to InfluxDB (token: GPUFLEET_INFLUX__TOKEN)",
    )
    influx.add_argument("--influx-url", help="e.g. http://127.0.0.1:8086 (GPUFLEET_INFLUX__URL)")
    influx.add_argument("--influx-org", help="InfluxDB 2 organisation")
    influx.add_argument("--influx-bucket", help="InfluxDB 2 bucket")
    influx.add_argument("--influx-database", help="InfluxDB 3 database")
    p.set_defaults(run=run)


def at_least_one(text: str) -> int:
    """argparse type: an integer >= 1 (``--nodes 0`` is a usage error, not a traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def batch_interval(args: argparse.Namespace) -> float:
    """Wall seconds between an agent's batches: about 30 simulated seconds, 0.2..1 s."""
    speed: float = args.speed
    return min(1.0, max(0.2, 30.0 / speed))


def lead_seconds(args: argparse.Namespace) -> float:
    """Simulated seconds an agent's samples may take to be acknowledged before simulated
    time waits for them: two batch intervals (or two steps), what a sample takes at
    ``--speed`` on a machine that keeps up."""
    speed: float = args.speed
    step: float = args.step
    return 2.0 * max(step, batch_interval(args) * speed)


def stale_after_seconds(args: argparse.Namespace) -> float:
    """A GPU turns unknown past the pacer's lead plus two steps (the newest sample of an
    agent within the lead is up to a step older than it), and never within a minute."""
    step: float = args.step
    return max(60.0, lead_seconds(args) + 2.0 * step)


def build_demo(args: argparse.Namespace, workdir: Path) -> Demo:
    if args.speed <= 0 or args.step <= 0:
        raise ConfigError("demo: --speed and --step must be > 0")
    now = time.time()
    start = now - args.history * 3600.0
    clock = SimClock(start)
    fleet = demo_fleet(args, start)
    _check_ports(args.port, [node.name for node in fleet.nodes])
    token = secrets.token_urlsafe(24)
    base = (
        load_settings(CollectorSettings, args.config, os.environ, foreign=(AgentSettings,))
        if args.config is not None
        else CollectorSettings()
    )
    # messages link the console: the demo's own URL unless the file names a public one
    public_url = base.server.public_url or f"http://127.0.0.1:{args.port}"
    settings = dataclasses.replace(
        base,
        server=dataclasses.replace(
            base.server, port=args.port, tokens=[token], public_url=public_url
        ),
        ledger=LedgerSettings(url=str(args.db or workdir / "gpufleet-demo.db")),
        influx=influx_settings(args, os.environ),
        # the pacer keeps every agent within the lead, so only a real gap turns a GPU unknown
        analysis=dataclasses.replace(base.analysis, stale_after_seconds=stale_after_seconds(args)),
        # simulated time moves in --step jumps: a batch sent just before one arrives a step
        # "late", which is no skew to correct (--skew's node is far past it)
        ingest=dataclasses.replace(base.ingest, clock_correction_min_seconds=2.0 * args.step),
    )
    tune_gc()  # as `gpufleet collector` does
    collector = build_collector(settings, clock, tokens=frozenset([token]))
    url = f"http://127.0.0.1:{args.port}"
    agents = [
        _agent(node, i, args, clock, url, token, workdir, outage_of(args, node.name, now, clock))
        for i, node in enumerate(fleet.nodes)
    ]
    pacer = Pacer(clock, agents, args.step, args.speed, lead_seconds(args))
    return Demo(clock, fleet, collector, agents, token, url, pacer)


def _check_ports(port: int, nodes: list[str]) -> None:
    """The collector's port and one per simulated agent (port+1..port+N) must be free."""
    wanted = {port: "the demo collector"}
    for i, node in enumerate(nodes):
        wanted[port + 1 + i] = f"simulated agent {node}'s /metrics"
    hint = (
        f"the demo takes --port and the {len(nodes)} ports after it (another gpufleet demo "
        f"running?); choose another range with --port, e.g. --port {port + 100}"
    )
    check_free("127.0.0.1", wanted, hint)


def influx_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> InfluxSettings:
    """The collector's ``influx`` section: ``GPUFLEET_INFLUX__*``, then ``--influx-*``."""
    own = {k: v for k, v in environ.items() if k.startswith("GPUFLEET_INFLUX__")}
    flags = {f"influx.{k}": getattr(args, f"influx_{k}", None) for k in INFLUX_FLAGS}
    return load_settings(CollectorSettings, None, own, flags).influx


def _agent(
    node: Any,
    i: int,
    args: argparse.Namespace,
    clock: SimClock,
    url: str,
    token: str,
    workdir: Path,
    outage: Outage | None = None,
) -> DemoAgent:
    stats = AgentStats()
    offset = node_clock_offset(args, node.name)
    agent_clock: Callable[[], float] = SkewedClock(clock, offset) if offset else clock
    source = SkewedNode(node, offset) if offset else node
    shipper_settings = ShipperSettings(
        url=url,
        token=token,
        spool_dir=workdir / "spool" / node.name,
        batch_interval_seconds=batch_interval(args),
    )
    shipper = Shipper(shipper_settings, node.name, stats, transport=outage, clock=agent_clock)
    tally = XidTally()
    interval = args.step / args.speed
    # the workloads' host CPU (issue 24); a node on a skewed clock would stamp it wrongly
    hosts = node if isinstance(node, SimulatedNode) and not offset else None
    sampler = Sampler(
        source, stats, interval, sink=shipper, clock=agent_clock, observers=[tally], hosts=hosts
    )
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=True)
    # the 4.8 names: those NVIDIA's dcgm-exporter dashboard queries
    exporter = AgentExporter(
        node.name, sampler.snapshot, stats, True, xid_tally=tally, dcgm_naming="4.8"
    )
    registry.register(exporter)
    port = args.port + 1 + i
    serve_metrics(registry, "127.0.0.1", port)
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    return DemoAgent(sampler, shipper, stats, metrics_url, node.name, outage)


def prerun(
    demo: Demo, step: float, until: float, progress: Callable[[float], None] = lambda _: None
) -> None:
    """Push simulated history from the fleet's start to ``until`` as fast as it goes,
    telling ``progress`` the fraction done after each shipment."""
    begin = t = demo.clock()
    while t < until:
        demo.clock.set(t)
        for agent in demo.agents:
            agent.sampler.tick()
        t += step
        if int(t / step) % 60 == 0:  # ship every 60 samples, like a slow batch interval
            _ship_and_apply(demo)
            progress(min(1.0, (t - begin) / (until - begin)))
    demo.clock.set(until)
    _ship_and_apply(demo)


class HistoryProgress:
    """Prints the pre-run's progress to stderr, a line per tenth, so a 20 s pre-run of a
    large fleet is not silence."""

    def __init__(self, hours: float, gpus: int) -> None:
        self.printed = -1
        if hours > 0:
            print(f"pre-running {hours:g} simulated hours of history for {gpus} GPUs ...",
                  file=sys.stderr, flush=True)  # fmt: skip

    def __call__(self, fraction: float) -> None:
        tenth = int(fraction * 10)
        if tenth > self.printed and tenth < 10:
            self.printed = tenth
            print(f"  history {tenth * 10}%", file=sys.stderr, flush=True)


def _ship_and_apply(demo: Demo) -> None:
    for agent in demo.agents:
        agent.shipper.flush()
    demo.collector.apply()
    demo.collector.core.recommender.evaluate_if_due()


def run(args: argparse.Namespace) -> int:
    for noisy in ("httpx", "collector.http.app", "agent.shipper"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="gpufleet-demo-") as tmp:
        demo = build_demo(args, Path(tmp))
        live = start(demo, args)
        try:
            run_live(demo, args, live.stop)
            finish(demo, live)
            print_summary(demo, final=True)
        finally:
            close(demo, live)
    return 0


@dataclass
class Running:
    """A started demo: its HTTP server, the agents' threads and what stops them."""

    server: uvicorn.Server
    stop: threading.Event
    threads: list[threading.Thread]


def start(demo: Demo, args: argparse.Namespace) -> Running:
    """Serve, pre-run the history, then run the fleet live at ``--speed`` at most."""
    server = serve(demo.collector)
    try:
        gpus = sum(len(node.gpus) for node in demo.fleet.nodes)
        prerun(demo, args.step, time.time(), HistoryProgress(args.history, gpus))
        stop = threading.Event()
        threads = _start_agents(demo, stop)
        # applying keeps up with the reorder window (30 simulated s); evaluation is due every
        # simulated minute, and at 1,000 GPUs one takes ~0.6 s
        demo.collector.start_jobs(apply_every_seconds=0.5, check_every_seconds=1.0)
    except BaseException:
        server.should_exit = True
        raise
    return Running(server, stop, threads)


def finish(demo: Demo, live: Running) -> None:
    """Stop the agents, ship what they hold, apply and evaluate everything received."""
    live.stop.set()
    for thread in live.threads:
        thread.join(timeout=5)
    for agent in demo.agents:
        agent.shipper.close()
    demo.collector.core.applier.tick(flush=True)
    demo.collector.core.recommender.evaluate(demo.clock())


def close(demo: Demo, live: Running) -> None:
    live.stop.set()
    live.server.should_exit = True
    demo.collector.stop()


def _start_agents(demo: Demo, stop: threading.Event) -> list[threading.Thread]:
    """The pacer's thread (it has every agent read at each step) and a shipper thread per
    agent."""
    targets = [demo.pacer.run, *(agent.shipper.run for agent in demo.agents)]
    threads = [threading.Thread(target=t, args=(stop,), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    return threads
