"""Collector replicas on one PostgreSQL (issue 18): CPU per GPU-sample of each replica
process and of the PostgreSQL server, batches per second, and the replicas and PostgreSQL
cores a fleet needs, beside a single collector on SQLite and on PostgreSQL, in one run.

Run from the repository root::

    .venv/bin/python -m bench.collector_replicas            # 10,000 GPUs, 60 s
    .venv/bin/python -m bench.collector_replicas --quick    # seconds, for the smoke test

Four setups over the same pre-encoded fleet (bench/collector_throughput.py's pipeline and
fleet: nodes of 8 GPUs at 1 Hz, a gzipped batch per node every 5 s, "concurrent"
arrivals), each collector in a process of its own: one collector on a SQLite file
(synchronous=FULL), one on PostgreSQL, and 1 and 2 replicas (``cluster.enabled``, leases
of 5 s renewed every second) on a database of their own on one local PostgreSQL 15
(tests/postgres.py, with ``fsync`` and ``full_page_writes`` back on:
bench/collector_ledger.py). With 2 replicas, batch i of each second goes to replica i mod 2
(the agents' own choice: any replica acknowledges any batch into the shared intake, the
shard's owner applies it); the replicas wait for an even split of the 64 shards before the
clock starts and keep pace second by second (a barrier), so each owner finds the other's
batches in the intake as a running fleet would; only the leader evaluates recommendations.

Figures: each process's CPU (``time.process_time``, all its threads, the lease keeper's
too) from the first batch to the final flush, per million GPU-samples it applied; the
PostgreSQL server's (/proc utime + stime of the postmaster and its children, cutime +
cstime of those that exited) over the same span, per million GPU-samples of the fleet;
batches per wall second and per CPU second of the collectors. From the 2-replica run: the
replicas and PostgreSQL cores for 10k, 100k and 300k GPUs at 1 Hz (a replica is one Python
process: planned at ``REPLICA_CORE_SHARE`` of a core). Targets (issue 18): a replica on
PostgreSQL at most 1.5x the SQLite collector's CPU per GPU-sample, PostgreSQL at most 0.5x
of the replicas'. Reported, never asserted.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.collector_feed import Lockstep
from bench.collector_ledger import (
    TARGET_REPLICA_RATIO,
    TARGET_SERVER_RATIO,
    durable,
    server_cpu_seconds,
)
from bench.collector_throughput import encode_fleet, run_collector
from bench.harness import print_table
from bench.synthetic_fleet import BATCH_SECONDS, GPUS_PER_NODE
from tests.postgres import PostgresServer, start_postgres

if TYPE_CHECKING:
    from gpufleet.cli.collector import Collector

Arrivals = list[list[tuple[bytes, int]]]
#: setup name, ledger, replicas (0: one collector, cluster off)
SETUPS = (("sqlite", "sqlite", 0), ("postgresql", "postgresql", 0),
          ("1 replica", "postgresql", 1), ("2 replicas", "postgresql", 2))  # fmt: skip
PLAN_GPUS = (10_000, 100_000, 300_000)
#: the share of a core a replica is planned to use (headroom for bursts and reads)
REPLICA_CORE_SHARE = 0.7
LEASE_SECONDS, RENEW_SECONDS = 5.0, 1.0
_SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Proc:
    """What one collector process reports."""

    cpu_seconds: float
    samples: int
    applied: int
    batches: int
    leader: bool
    shards: int


@dataclass(frozen=True)
class Setup:
    name: str
    procs: list[Proc]
    server_seconds: float | None
    wall_seconds: float

    @property
    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds for p in self.procs)

    @property
    def samples(self) -> int:
        return sum(p.samples for p in self.procs)

    @property
    def per_million(self) -> float:
        """Collector CPU seconds per million GPU-samples of the fleet."""
        return self.cpu_seconds * 1e6 / self.samples


def split(arrivals: Arrivals, parts: int) -> list[Arrivals]:
    """Batch i of each second to part i mod ``parts``."""
    return [[second[k::parts] for second in arrivals] for k in range(parts)]


def balanced(replicas: int, start: Any, step: Any) -> Any:
    """``prepare`` for run_collector: wait for this replica's even share of the shards and
    every replica live, then start the clock with the others; pace by ``step``."""

    def prepare(collector: Collector) -> Lockstep:
        keeper = collector.keeper
        if keeper is not None:
            share = collector.settings.cluster.shard_count // replicas
            deadline = time.monotonic() + 20 * LEASE_SECONDS
            while not (len(keeper.state.shards) == share and
                       keeper.state.live_replicas == replicas):  # fmt: skip
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no even split of the shards: {keeper.state}")
                time.sleep(0.1)
        start.wait()
        return Lockstep(step.wait, collector.leads)

    return prepare


def collector_process(arrivals: Arrivals, start_unix: float, url: str | None, replicas: int,
                      barriers: tuple[Any, Any, Any], results: Any) -> None:  # fmt: skip
    """One collector or replica in this (spawned) process; its figures into ``results``."""
    from collector.cluster.settings import ClusterSettings

    start, step, end = barriers
    cluster = None
    if replicas:
        cluster = ClusterSettings(enabled=True, lease_seconds=LEASE_SECONDS,
                                  renew_seconds=RENEW_SECONDS)  # fmt: skip
    leads: list[bool] = []
    shards: list[int] = []

    def prepare(collector: Collector) -> Lockstep:
        step_ = balanced(max(replicas, 1), start, step)(collector)
        shards.append(len(collector.keeper.state.shards) if collector.keeper else 0)
        leads.append(collector.leads())
        return step_

    with tempfile.TemporaryDirectory(prefix="bench-replica-") as tmp:
        timed = run_collector(arrivals, start_unix, Path(tmp), arrivals_mode="concurrent",
                              ledger_url=url, cluster=cluster, prepare=prepare)  # fmt: skip
    results.put(Proc(timed.cpu_seconds, timed.samples, timed.applied, timed.batches,
                     leads[0], shards[0]))  # fmt: skip
    end.wait()


def run_setup(name: str, parts: list[Arrivals], start_unix: float, url: str | None,
              replicas: int, server: PostgresServer) -> Setup:  # fmt: skip
    """Start the setup's processes; time PostgreSQL and the wall from the clock's start
    (every process built and balanced) until every process has flushed."""
    n = len(parts)
    start, step, end = _SPAWN.Barrier(n + 1), _SPAWN.Barrier(n), _SPAWN.Barrier(n + 1)
    results = _SPAWN.Queue()
    procs = [_SPAWN.Process(target=collector_process,
                            args=(p, start_unix, url, replicas, (start, step, end), results))
             for p in parts]  # fmt: skip
    for p in procs:
        p.start()
    start.wait(timeout=300)
    before, wall = server_cpu_seconds(server), time.perf_counter()
    reported = [results.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - wall
    server_seconds = server_cpu_seconds(server) - before
    end.wait(timeout=60)
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise RuntimeError(f"{name}: a collector process exited with {p.exitcode}")
    return Setup(name, reported, server_seconds if url else None, wall)


def measure(gpus: int, seconds: int, server: PostgresServer) -> list[Setup]:
    start_unix = time.time() - seconds - 10
    arrivals = encode_fleet(gpus, seconds, start_unix)
    setups = []
    for name, ledger, replicas in SETUPS:
        url = server.new_database("bench") if ledger == "postgresql" else None
        parts = split(arrivals, max(replicas, 1))
        setups.append(run_setup(name, parts, start_unix, url, replicas, server))
    return setups


def process_rows(gpus: int, setups: list[Setup]) -> list[dict[str, object]]:
    sqlite = setups[0].per_million
    return [{
        "setup": s.name, "GPUs": gpus, "process": f"{i} leader" if p.leader and p.shards
        else str(i), "shards": p.shards, "GPU-samples in": p.samples, "applied": p.applied,
        "batches in": p.batches, "CPU s": round(p.cpu_seconds, 2),
        "CPU s per 1M applied": round(p.cpu_seconds * 1e6 / max(p.applied, 1), 1),
        "vs SQLite": f"{p.cpu_seconds * 1e6 / max(p.applied, 1) / sqlite:.2f}x",
    } for s in setups for i, p in enumerate(s.procs)]  # fmt: skip


def setup_rows(gpus: int, setups: list[Setup]) -> list[dict[str, object]]:
    sqlite = setups[0].per_million
    rows = []
    for s in setups:
        server = s.server_seconds
        batches = sum(p.batches for p in s.procs)
        rows.append({
            "setup": s.name, "GPUs": gpus, "GPU-samples": s.samples,
            "applied": sum(p.applied for p in s.procs), "wall s": round(s.wall_seconds, 1),
            "batches/s (wall)": round(batches / s.wall_seconds),
            "batches per collector CPU s": round(batches / s.cpu_seconds),
            "collector CPU s per 1M": round(s.per_million, 1),
            "vs SQLite": f"{s.per_million / sqlite:.2f}x (target <= {TARGET_REPLICA_RATIO}x)",
            "PostgreSQL CPU s per 1M": "-" if server is None
            else round(server * 1e6 / s.samples, 1),
            "PostgreSQL vs collectors": "-" if server is None
            else f"{server / s.cpu_seconds:.2f}x (target <= {TARGET_SERVER_RATIO}x)",
        })  # fmt: skip
    return rows


def plan_rows(basis: Setup) -> list[dict[str, object]]:
    """Cores for a fleet at 1 Hz with 5 s batches, from ``basis``'s CPU per GPU-sample."""
    replica_per_sample = basis.per_million / 1e6
    server_per_sample = (basis.server_seconds or 0.0) / basis.samples
    return [{
        "GPUs at 1 Hz": g, "GPU-samples/s": g,
        "batches/s": round(g / GPUS_PER_NODE / BATCH_SECONDS),
        "replica cores": round(g * replica_per_sample, 2),
        f"replicas (at {REPLICA_CORE_SHARE:.0%} of a core)": max(
            1, math.ceil(g * replica_per_sample / REPLICA_CORE_SHARE)),
        "PostgreSQL cores": round(g * server_per_sample, 2),
    } for g in PLAN_GPUS]  # fmt: skip


def report(gpus: int, setups: list[Setup]) -> None:
    print(f"\n{gpus:,} GPUs: each collector process")
    print_table(process_rows(gpus, setups))
    print(f"\n{gpus:,} GPUs: each setup (PostgreSQL over the same span)")
    print_table(setup_rows(gpus, setups))
    for s in setups:
        applied = sum(p.applied for p in s.procs)
        if applied != s.samples:
            print(f"WARNING: {s.name}: {applied} samples applied of {s.samples}")
    basis = setups[-1]
    print(f"\nNeeded at 1 Hz with {BATCH_SECONDS} s batches, from the {basis.name} run")
    print_table(plan_rows(basis))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="*", default=[10_000])
    parser.add_argument("--seconds", type=int, default=60, help="simulated seconds of samples")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = parser.parse_args(argv)
    sizes, seconds = ([80], 20) if args.quick else (args.gpus, args.seconds)
    server = start_postgres()
    try:
        durable(server)
        for gpus in sizes:
            report(gpus, measure(gpus, seconds, server))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
