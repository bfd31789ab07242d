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
step from ``--start-agents`` until a step sheds (a 429), accepts under 90 % of what was
offered or answers with a p99 over ``P99_LIMIT_SECONDS``; the knee is the last step before
that. Then one step offers 10x the knee's load (10x its agents, ``--overload-intervals``
batches each): the collector's VmHWM must stay under the ceiling the bounds it runs with
set, ``idle RSS + ingest.max_gpus x KIB_PER_GPU + INFLIGHT_FACTOR x
server.max_inflight_bytes`` (printed; the run says whether it held). At the end the
collector's refusals by reason (``gpufleet_collector_rejected_batches_total``) are printed:
``overloaded`` (shed at the door) and ``limit_exceeded`` (the fleet at ``--max-gpus``).
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
from prometheus_client.parser import text_string_to_metric_families

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from bench.harness import (
    BATCH_HEADERS,
    MIB,
    TOKEN,
    child_process,
    free_port,
    memory_bytes_of,
    print_table,
    python_module,
    wait_for_http,
)

#: live memory per GPU at 1 Hz, measured by the ramp (~37 KiB: the reorder buffer's ~45
#: readings, the console's series charts, ~29 KiB, accounting state); with a margin
KIB_PER_GPU = 48
#: in-flight bodies are held as sent, then decompressed and decoded on the ingest thread
INFLIGHT_FACTOR = 4
#: a step that accepts less than this share of what it offered is past the knee...
ACCEPTED_SHARE = 0.9
#: ...and so is one whose p99 latency passes this (an agent's batch answered a fifth of
#: its 5 s interval late is a collector past its working point, shedding or not)
P99_LIMIT_SECONDS = 1.0


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
        slow = self.percentile(0.99) > P99_LIMIT_SECONDS
        return self.shed > 0 or self.accepted < ACCEPTED_SHARE * self.offered or slow


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
    async with httpx.AsyncClient(headers=BATCH_HEADERS, limits=limits, timeout=120) as client:
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


def refusals(base: str) -> dict[str, int]:
    """The collector's refused batches by reason, from its /metrics."""
    found = {}
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text):
        if family.name == "gpufleet_collector_rejected_batches":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    found[sample.labels["reason"]] = int(sample.value)
    return found


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
    parser.add_argument("--start-agents", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=7)
    parser.add_argument("--gpus", type=int, default=32, help="GPUs per agent")
    parser.add_argument("--interval", type=int, default=5, help="seconds between batches")
    parser.add_argument("--intervals", type=int, default=3, help="batches per agent per step")
    parser.add_argument("--max-inflight-mib", type=int, default=64)
    parser.add_argument("--max-queued", type=int, default=500)
    parser.add_argument("--max-gpus", type=int, default=20_000, help="ingest.max_gpus")
    parser.add_argument("--overload-intervals", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.start_agents, args.max_steps, args.interval, args.intervals = 2, 2, 1, 2
        args.gpus, args.max_gpus = 8, 64
        args.max_queued = 4
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    print(
        f"Collector under load: agents of {args.gpus} GPUs, a batch every {args.interval} s "
        f"({args.intervals} per step); bounds: server.max_inflight_bytes "
        f"{args.max_inflight_mib} MiB, server.max_queued_batches {args.max_queued}, "
        f"ingest.max_gpus {args.max_gpus}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        env = dict(os.environ, GPUFLEET_SERVER__TOKENS=TOKEN,
                   GPUFLEET_SERVER__MAX_INFLIGHT_BYTES=str(args.max_inflight_mib * MIB),
                   GPUFLEET_SERVER__MAX_QUEUED_BATCHES=str(args.max_queued),
                   GPUFLEET_INGEST__MAX_GPUS=str(args.max_gpus))  # fmt: skip
        cmd = python_module("gpufleet.cli.main", "collector", "--port", str(port),
                            "--db", str(Path(tmp) / "ledger.db"))  # fmt: skip
        with child_process(cmd, env=env, quiet=True) as collector:
            wait_for_http(f"{base}/healthz")
            idle = memory_bytes_of(collector.pid)[0]
            steps: list[Step] = []
            agents = args.start_agents
            for number in range(args.max_steps):
                steps.append(run_step(f"{base}/v1/batches", collector.pid, number, agents, args))
                print_table([row(str(number + 1), steps[-1])])  # progress, as it goes
                sys.stdout.flush()
                if steps[-1].past_knee:
                    break
                agents *= 2
            below = [s for s in steps if not s.past_knee]
            knee = below[-1] if below else steps[0]
            args.intervals = args.overload_intervals
            overload = run_step(
                f"{base}/v1/batches", collector.pid, len(steps), 10 * knee.agents, args
            )
            refused = refusals(base)
    rows = [row(str(i + 1), s) for i, s in enumerate(steps)] + [row("10x knee", overload)]
    print_table(rows)
    peak = max(s.hwm for s in steps)
    print(f"collector RSS idle: {idle / MIB:.0f} MiB")
    print(
        f"knee: {knee.agents} agents, {knee.accepted_rate:,.0f} GPU-samples/s accepted, "
        f"p99 {knee.percentile(0.99) * 1e3:.1f} ms; peak RSS over the ramp {peak / MIB:.0f} MiB"
    )
    ceiling = (
        idle + args.max_gpus * KIB_PER_GPU * 1024 + INFLIGHT_FACTOR * args.max_inflight_mib * MIB
    )
    within = overload.hwm <= ceiling
    print(
        f"10x knee ({overload.agents} agents): VmHWM {overload.hwm / MIB:.0f} MiB, "
        f"ceiling {ceiling / MIB:.0f} MiB: {'within' if within else 'PAST THE CEILING'}; "
        f"{overload.shed} answered 429, {overload.accepted_rate:,.0f} GPU-samples/s accepted"
    )
    print("refused by reason: " + ", ".join(f"{k} {v:,}" for k, v in refused.items() if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
