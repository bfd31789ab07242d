"""Collector throughput through HTTP: the real `gpufleet collector` process, the agents'
gzipped batches POSTed to it, its CPU per GPU-sample, HTTP edge included.

Run from the repository root::

    .venv/bin/python -m bench.collector_http              # 1,000 GPUs, 1 and 8 posters
    .venv/bin/python -m bench.collector_http --quick      # seconds, for the smoke test

bench/collector_throughput.py times the pipeline without the HTTP edge; this runs the
collector as operators do (`gpufleet collector`: uvicorn, Starlette, auth, access log, the
console's series tap, APScheduler applying every ``ingest.apply_interval_seconds``) in a
subprocess with a temporary SQLite ledger, and POSTs the same synthetic fleet's batches
(bench/synthetic_fleet.py) from ``--posters`` threads of this process, each a keep-alive
HTTP client like an agent, each simulated second's batches in that wall-clock second, so
the apply job (every ``ingest.apply_interval_seconds``, the collector's default unless
``--apply-every``) applies as many seconds of samples each time as it would in a fleet.
The samples are stamped a minute in the past, so the reorder window does not hold them
and the run ends one apply after the last batch. The first fifth of the batches, posted at
once, warm the server up (imports on first use) and are not counted. The figure is the
collector process's CPU (utime + stime, all its threads) from the first counted POST until
the apply job has applied every sample (``pending_samples`` 0 on ``/healthz``), per
GPU-sample counted. A GET of an unknown path, 500 times, gives the HTTP edge's floor.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.collector_throughput import (
    DEFAULT_APPLY_EVERY,
    TARGET_SAMPLES_PER_SECOND,
    encode_fleet,
)
from bench.harness import (
    BATCH_HEADERS,
    TOKEN,
    child_process,
    cpu_seconds_of,
    free_port,
    print_table,
    python_module,
    wait_for_http,
)
from bench.synthetic_fleet import BATCH_SECONDS


@dataclass(frozen=True)
class HttpRun:
    gpus: int
    posters: int
    synchronous: str
    batch_seconds: int
    samples: int
    requests: int
    cpu_seconds: float
    wall_seconds: float
    floor_ms: float  # collector CPU per GET of an unknown path

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.cpu_seconds


def post_all(url: str, seconds: list[list[bytes]], posters: int, paced: bool) -> None:
    """POST each second's bodies from ``posters`` threads (a keep-alive client each), one
    second of wall clock per second when ``paced``; every answer must be 200."""
    work: queue.Queue[bytes | None] = queue.Queue()
    failed: list[str] = []

    def poster() -> None:
        with httpx.Client(headers=BATCH_HEADERS, timeout=60) as client:
            while (body := work.get()) is not None:
                response = client.post(url, content=body)
                if response.status_code != 200:
                    failed.append(f"HTTP {response.status_code}: {response.text}")
                work.task_done()
            work.task_done()

    threads = [threading.Thread(target=poster) for _ in range(posters)]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    for second, bodies in enumerate(seconds):
        if paced:
            time.sleep(max(0.0, start + second - time.monotonic()))
        for body in bodies:
            work.put(body)
    for _ in threads:
        work.put(None)
    for thread in threads:
        thread.join()
    if failed:
        raise RuntimeError(f"the collector refused a synthetic batch: {failed[0]}")


def wait_applied(base: str, timeout_seconds: float) -> None:
    """Until the collector's apply job has applied every buffered sample."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if httpx.get(f"{base}/healthz").json()["pending_samples"] == 0:
            return
        time.sleep(0.2)
    raise TimeoutError(f"samples still pending after {timeout_seconds} s")


def floor_ms(base: str, pid: int) -> float:
    with httpx.Client() as client:
        for _ in range(50):
            client.get(f"{base}/bench-unknown-path")
        cpu = cpu_seconds_of(pid)
        for _ in range(500):
            client.get(f"{base}/bench-unknown-path")
        return (cpu_seconds_of(pid) - cpu) / 500 * 1e3


def run_http(
    gpus: int, seconds: int, posters: int, synchronous: str, apply_every: float,
    batch_seconds: int = BATCH_SECONDS,
) -> HttpRun:  # fmt: skip
    start_unix = time.time() - 2 * seconds - 60  # every sample is past the 30 s window
    arrivals = encode_fleet(gpus, seconds, start_unix, batch_seconds)
    warm, counted = arrivals[: seconds // 5], arrivals[seconds // 5 :]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        env = dict(os.environ, GPUFLEET_SERVER__TOKENS=TOKEN,
                   GPUFLEET_LEDGER__SYNCHRONOUS=synchronous,
                   GPUFLEET_INGEST__APPLY_INTERVAL_SECONDS=str(apply_every))  # fmt: skip
        args = python_module("gpufleet.cli.main", "collector", "--port", str(port),
                             "--db", str(Path(tmp) / "ledger.db"))  # fmt: skip
        with child_process(args, env=env, quiet=True) as collector:
            wait_for_http(f"{base}/healthz")
            post_all(f"{base}/v1/batches", [[b for b, _ in s] for s in warm], posters, False)
            wait_applied(base, 2 * apply_every + 60)
            cpu, wall = cpu_seconds_of(collector.pid), time.perf_counter()
            post_all(f"{base}/v1/batches", [[b for b, _ in s] for s in counted], posters, True)
            wait_applied(base, 2 * apply_every + 60)
            cpu, wall = cpu_seconds_of(collector.pid) - cpu, time.perf_counter() - wall
            floor = floor_ms(base, collector.pid)
    samples = sum(n for arrival in counted for _, n in arrival)
    requests = sum(len(arrival) for arrival in counted)
    return HttpRun(gpus, posters, synchronous, batch_seconds, samples, requests, cpu, wall, floor)


def row(r: HttpRun) -> dict[str, object]:
    return {
        "GPUs": r.gpus,
        "posters": r.posters,
        "ledger synchronous": r.synchronous,
        "batch s": r.batch_seconds,
        "GPU-samples": r.samples,
        "requests": r.requests,
        "collector CPU s": round(r.cpu_seconds, 2),
        "wall s": round(r.wall_seconds, 1),
        "GPU-samples/s": round(r.samples_per_second),
        "vs target": f"{r.samples_per_second / TARGET_SAMPLES_PER_SECOND:.2f}x",
        "CPU ms per request": round(r.cpu_seconds / r.requests * 1e3, 2),
        "HTTP floor ms per request": round(r.floor_ms, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000], metavar="GPUS")
    parser.add_argument("--seconds", type=int, default=60, help="simulated seconds of batches")
    parser.add_argument("--posters", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--synchronous", nargs="+", choices=["FULL", "NORMAL"],
                        default=["FULL", "NORMAL"])  # fmt: skip
    parser.add_argument(
        "--apply-every",
        type=float,
        default=DEFAULT_APPLY_EVERY,
        help="ingest.apply_interval_seconds (default: the collector's)",
    )
    parser.add_argument(
        "--batch-seconds",
        type=int,
        nargs="+",
        default=[BATCH_SECONDS],
        help="seconds of samples per batch (the agent's batch_interval_seconds)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.seconds, args.posters, args.synchronous = [16], 15, [2], ["FULL"]
        args.apply_every = 3.0
    print(
        f"Collector through HTTP: {args.seconds} simulated seconds at 1 Hz, nodes of 8 GPUs, "
        f"one batch per node every {args.batch_seconds} s; applied every {args.apply_every:g} s"
    )
    runs = [
        run_http(n, args.seconds, k, sync, args.apply_every, b)
        for n in args.sizes
        for b in args.batch_seconds
        for sync in args.synchronous
        for k in args.posters
    ]
    print_table([row(r) for r in runs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
