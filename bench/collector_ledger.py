"""The collector on SQLite and on PostgreSQL side by side, in one run: CPU per GPU-sample of
the collector process on each ledger, and the CPU the PostgreSQL server spent for it.

Run from the repository root::

    .venv/bin/python -m bench.collector_ledger             # 1,000 and 10,000 GPUs, 60 s
    .venv/bin/python -m bench.collector_ledger --quick     # seconds, for the smoke test

The fleet and the pipeline are bench/collector_throughput.py's (nodes of 8 GPUs at 1 Hz, a
gzipped batch per node every 5 s, every batch made durable before its ack, applied and
committed on the scheduler's intervals, "concurrent" arrivals), once with a SQLite file
(synchronous=FULL) and once with ``ledger.url: postgresql://...`` on a local PostgreSQL 15
(tests/postgres.py, here with ``fsync`` and ``full_page_writes`` switched back on, so its
commits are as durable as SQLite's FULL). PostgreSQL's CPU is read from /proc: utime +
stime of the postmaster and of its children now, plus cutime + cstime of those that exited.

Targets (issue 18): the collector on PostgreSQL at most 1.5x the SQLite collector's CPU per
GPU-sample, PostgreSQL at most 0.5x of the collector's. Reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import psycopg

from bench.collector_throughput import encode_fleet, run_collector
from bench.harness import print_table
from tests.postgres import PostgresServer, start_postgres

TARGET_REPLICA_RATIO = 1.5
TARGET_SERVER_RATIO = 0.5
_TICKS = os.sysconf("SC_CLK_TCK")


def server_cpu_seconds(server: PostgresServer) -> float:
    """CPU seconds of the server's processes so far (the postmaster and its children)."""
    postmaster = int((server.directory / "data" / "postmaster.pid").read_text().split()[0])
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile: its time is in the postmaster's cutime now
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def durable(server: PostgresServer) -> None:
    """Commits synced as a production server syncs them (the test server skips it)."""
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = on")
        conn.execute("ALTER SYSTEM SET full_page_writes = on")
        conn.execute("SELECT pg_reload_conf()")


def measure(gpus: int, seconds: int, server: PostgresServer) -> list[dict[str, object]]:
    start_unix = time.time() - seconds - 10
    arrivals = encode_fleet(gpus, seconds, start_unix)
    rows: list[dict[str, object]] = []
    sqlite_per_million = None
    for backend in ("sqlite", "postgresql"):
        url = server.new_database("bench") if backend == "postgresql" else None
        with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp:
            before = server_cpu_seconds(server)
            wall = time.perf_counter()
            timed = run_collector(arrivals, start_unix, Path(tmp), arrivals_mode="concurrent",
                                  ledger_url=url)  # fmt: skip
            wall = time.perf_counter() - wall
            server_seconds = server_cpu_seconds(server) - before
        per_million = timed.cpu_seconds * 1e6 / timed.samples
        sqlite_per_million = sqlite_per_million or per_million
        rows.append({
            "ledger": backend, "GPUs": gpus, "GPU-samples": timed.samples,
            "applied": timed.applied, "batches": timed.batches, "wall s": round(wall, 1),
            "collector CPU s": round(timed.cpu_seconds, 2),
            "collector CPU s per 1M": round(per_million, 1),
            "vs SQLite": f"{per_million / sqlite_per_million:.2f}x "
                         f"(target <= {TARGET_REPLICA_RATIO}x)",
            "PostgreSQL CPU s": round(server_seconds, 2) if url else "-",
            "PostgreSQL vs collector": f"{server_seconds / timed.cpu_seconds:.2f}x "
                                       f"(target <= {TARGET_SERVER_RATIO}x)" if url else "-",
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--seconds", type=int, default=60, help="simulated seconds of samples")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = parser.parse_args(argv)
    sizes, seconds = ([80], 20) if args.quick else (args.gpus, args.seconds)
    server = start_postgres()
    try:
        durable(server)
        rows = [row for gpus in sizes for row in measure(gpus, seconds, server)]
    finally:
        server.stop()
    print("\nCollector CPU per GPU-sample on each ledger, and the PostgreSQL server's CPU")
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
