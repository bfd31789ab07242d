"""Collector under load: simulated agents on loopback ramped until the collector sheds
load (429), the knee, and the collector's memory at 10x the knee with the bounds set.

Run from the repository root::

    .venv/bin/python -m bench.collector_load             # ~3 min on a 2-core machine
    .venv/bin/python -m bench.collector_load --quick     # seconds, for the smoke test

The collector is the real ``gpufleet collector`` process (uvicorn, Starlette, auth, the
ingest thread, a temporary SQLite ledger at ``ledger.synchronous`` FULL, the apply job) in
a subprocess, with admission control set to ``--max-inflight-mib`` and ``--max-queued``.
Each simulated agent is one node of ``--gpus`` GPUs posting one real gzipped batch
(``agent.spool.gzip_batch``; ``--interval`` seconds of 1 Hz samples per GPU) every
``--interval`` seconds over its own keep-alive connection, the agents staggered evenly over
the interval, for ``--intervals`` intervals per step. Every body is built before its step
is timed. A refused batch is counted and not retried (the offered load stays what it is;
a real agent would retry after ``Retry-After``, holding the batch in its spool).

Per step: agents, offered GPU-samples/s (what was posted) and accepted GPU-samples/s
(samples in 200 answers), both over the step's posting time or until its last answer if
that came later, p50
and p99 latency of the answers (any status), 429 answers, and the collector's VmRSS
(highest seen during the step, sampled every 0.1 s) and VmHWM. The agents double each
step from ``--start-agents`` until a step sheds (a 429) or accepts under 90 % of what was
offered; the knee is the last step before that. Then one step offers 10x the knee's load
(10x its agents): the collector's VmHWM must stay under ``RSS_CEILING_MIB``, the ceiling
this benchmark states for the bounds it sets (the run prints whether it did).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from bench.harness import (
    MIB,
    child_process,
    free_port,
    memory_bytes_of,
    print_table,
    python_module,
    wait_for_http,
)

TOKEN = "bench-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Encoding": "gzip",
           "Content-Type": "application/json"}  # fmt: skip
#: the collector's peak RSS must stay under this at 10x the knee, with the bench's bounds
#: (64 MiB in flight, 500 queued batches): an idle collector is ~100 MiB, the in-flight
#: bodies and their decoded batches a few times the bound, the live fleet the rest
RSS_CEILING_MIB = 1024
#: a step that accepts less than this share of what it offered is past the knee
ACCEPTED_SHARE = 0.9


@dataclass
class Step:
    agents: int
    offered: int = 0  # GPU-samples posted
    accepted: int = 0  # GPU-samples in 200 answers
    shed: int = 0  # 429 answers
    other: dict[int, int] = field(default_factory=dict)  # other statuses -> count
    latencies: list[float] = field(default_factory=list)
    post_seconds: float = 0.0
    answer_seconds: float = 0.0
    rss_peak: int = 0
    hwm: int = 0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    @property
    def seconds(self) -> float:
        """The step's length: its posting time, or until its last answer if later."""
        return max(self.post_seconds, self.answer_seconds)

    @property
    def offered_rate(self) -> float:
        return self.offered / self.seconds if self.seconds else 0.0

    @property
    def accepted_rate(self) -> float:
        return self.accepted / self.seconds if self.seconds else 0.0

    @property
    def past_knee(self) -> bool:
        return self.shed > 0 or self.accepted < ACCEPTED_SHARE * self.offered


def agent_bodies(step: int, agent: int, gpus: int, interval: int, intervals: int,
                 start: float) -> list[bytes]:  # fmt: skip
    """One agent's gzipped batches for a step: node ``load-<agent>``, a boot of its own
    per step (so seqs start again), ``interval`` 1 Hz samples per GPU each."""
    node = f"load-{agent:05d}"
    infos = tuple(
        GpuInfo(uuid=f"GPU-{node}-{i}", index=i, name="NVIDIA H100 80GB HBM3") for i in range(gpus)
    )
    bodies = []
    for k in range(intervals):
        samples = tuple(
            GpuSample(
                timestamp=start + k * interval + s,
                gpu_uuid=info.uuid,
                sm_activity=0.6,
                dram_activity=0.3,
                power_watts=400.0 + i,
                memory_used_bytes=2**34,
                energy_joules=1.0e9 + 400.0 * (start + k * interval + s),
            )
            for s in range(interval)
            for i, info in enumerate(infos)
        )
        batch = Batch(schema_version=SCHEMA_VERSION, node=node,
                      agent_boot_id=f"boot-{node}-{step}", seq=k + 1,
                      sent_at=start + (k + 1) * interval, gpus=infos, samples=samples,
                      node_labels={"region": "DEU"})  # fmt: skip
        bodies.append(gzip.compress(msgspec.json.encode(batch), compresslevel=6))
    return bodies


def watch_rss(pid: int, step: Step, stop: threading.Event) -> None:
    while not stop.wait(0.1):
        step.rss_peak = max(step.rss_peak, memory_bytes_of(pid)[0])


async def post_step(url: str, bodies: list[list[bytes]], gpus: int, interval: int,
                    step: Step) -> None:  # fmt: skip
    agents = len(bodies)
    per_batch = gpus * interval
    limits = httpx.Limits(max_connections=agents, max_keepalive_connections=agents)
    async with httpx.AsyncClient(headers=HEADERS, limits=limits, timeout=120) as client:
        loop = asyncio.get_running_loop()
        t0 = loop.time() + 0.2

        async def agent(a: int) -> None:
            for k, body in enumerate(bodies[a]):
                await asyncio.sleep(
                    max(0.0, t0 + a / agents * interval + k * interval - loop.time())
                )
                sent = loop.time()
                step.offered += per_batch
                try:
                    response = await client.post(url, content=body)
                    status = response.status_code
                except httpx.HTTPError:
                    status = 0
                step.latencies.append(loop.time() - sent)
                if status == 200:
                    step.accepted += per_batch
                elif status == 429:
                    step.shed += 1
                else:
                    step.other[status] = step.other.get(status, 0) + 1

        await asyncio.gather(*(agent(a) for a in range(agents)))
        step.answer_seconds = loop.time() - t0
        step.post_seconds = len(bodies[0]) * interval


def run_step(url: str, pid: int, number: int, agents: int, args: argparse.Namespace) -> Step:
    start = time.time()
    bodies = [
        agent_bodies(number, a, args.gpus, args.interval, args.intervals, start)
        for a in range(agents)
    ]
    step = Step(agents)
    stop = threading.Event()
    watcher = threading.Thread(target=watch_rss, args=(pid, step, stop), daemon=True)
    watcher.start()
    asyncio.run(post_step(url, bodies, args.gpus, args.interval, step))
    stop.set()
    watcher.join()
    step.rss_peak = max(step.rss_peak, memory_bytes_of(pid)[0])
    step.hwm = memory_bytes_of(pid)[1]
    return step


def row(label: str, s: Step) -> dict[str, object]:
    return {
        "step": label,
        "agents": s.agents,
        "offered GPU-samples/s": round(s.offered_rate),
        "accepted GPU-samples/s": round(s.accepted_rate),
        "p50 ms": round(s.percentile(0.5) * 1e3, 1),
        "p99 ms": round(s.percentile(0.99) * 1e3, 1),
        "429": s.shed,
        "other": sum(s.other.values()),
        "RSS peak MiB": round(s.rss_peak / MIB),
        "VmHWM MiB": round(s.hwm / MIB),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-agents", type=int, default=25)
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per agent")
    parser.add_argument("--interval", type=int, default=5, help="seconds between batches")
    parser.add_argument("--intervals", type=int, default=3, help="batches per agent per step")
    parser.add_argument("--max-inflight-mib", type=int, default=64)
    parser.add_argument("--max-queued", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.start_agents, args.max_steps, args.interval, args.intervals = 2, 2, 1, 2
        args.max_queued = 4
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    print(
        f"Collector under load: agents of {args.gpus} GPUs, a batch every {args.interval} s "
        f"({args.intervals} per step); bounds: server.max_inflight_bytes "
        f"{args.max_inflight_mib} MiB, server.max_queued_batches {args.max_queued}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        env = dict(os.environ, GPUFLEET_SERVER__TOKENS=TOKEN,
                   GPUFLEET_SERVER__MAX_INFLIGHT_BYTES=str(args.max_inflight_mib * MIB),
                   GPUFLEET_SERVER__MAX_QUEUED_BATCHES=str(args.max_queued))  # fmt: skip
        cmd = python_module("gpufleet.cli.main", "collector", "--port", str(port),
                            "--db", str(Path(tmp) / "ledger.db"))  # fmt: skip
        with child_process(cmd, env=env, quiet=True) as collector:
            wait_for_http(f"{base}/healthz")
            idle = memory_bytes_of(collector.pid)[0]
            steps: list[Step] = []
            agents = args.start_agents
            for number in range(args.max_steps):
                steps.append(run_step(f"{base}/v1/batches", collector.pid, number, agents, args))
                if steps[-1].past_knee:
                    break
                agents *= 2
            below = [s for s in steps if not s.past_knee]
            knee = below[-1] if below else steps[0]
            overload = run_step(
                f"{base}/v1/batches", collector.pid, len(steps), 10 * knee.agents, args
            )
    rows = [row(str(i + 1), s) for i, s in enumerate(steps)] + [row("10x knee", overload)]
    print_table(rows)
    peak = max(s.hwm for s in steps)
    print(f"collector RSS idle: {idle / MIB:.0f} MiB")
    print(
        f"knee: {knee.agents} agents, {knee.accepted_rate:,.0f} GPU-samples/s accepted, "
        f"p99 {knee.percentile(0.99) * 1e3:.1f} ms; peak RSS over the ramp {peak / MIB:.0f} MiB"
    )
    within = overload.hwm <= RSS_CEILING_MIB * MIB
    print(
        f"10x knee ({overload.agents} agents): VmHWM {overload.hwm / MIB:.0f} MiB, "
        f"ceiling {RSS_CEILING_MIB} MiB: {'within' if within else 'PAST THE CEILING'}; "
        f"{overload.shed} answered 429, {overload.accepted_rate:,.0f} GPU-samples/s accepted"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
