"""Batches with known energy, a real collector process on a ledger the test places, and
what the ledger holds: for the write-path fault tests (disk full, quarantine).

Each node has one GPU drawing ``WATTS`` with an energy counter at ``WATTS * t``, held by
one pod; a batch covers ``[start, end]`` of it in 10 s steps, so the ledger's energy for
the GPU is exactly ``WATTS`` times the span applied."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import httpx
import msgspec

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from tests.e2e.collector_process import CollectorProcess
from tests.e2e.fleet_rig import TOKEN, free_port

WATTS = 100.0
STEP_SECONDS = 10
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: short intervals, so that a fault shows (and clears) in a second or two
FAST_CONFIG = """\
ingest:
  apply_interval_seconds: 0.2
  commit_interval_seconds: 0.5
  reorder_window_seconds: 1
"""


def gpu(node: str) -> GpuInfo:
    return GpuInfo(uuid=f"GPU-{node}", index=0, name="NVIDIA H100 80GB HBM3")


def pod(node: str) -> Workload:
    return Workload(kind=WorkloadKind.KUBERNETES_POD, id=node, name=f"job-{node}", namespace="ml")


def node_batch(node: str, seq: int, origin: float, times: range, memory: int = 1 << 30) -> Batch:
    """Samples at ``origin + t`` for t in ``times``; ``memory``: each one's memory in use."""
    info = gpu(node)
    samples = tuple(
        GpuSample(
            timestamp=origin + t,
            gpu_uuid=info.uuid,
            sm_activity=0.5,
            dram_activity=0.5,
            power_watts=WATTS,
            energy_joules=WATTS * t,
            memory_used_bytes=memory,
            workloads=(pod(node),),
        )
        for t in times
    )
    sent_at = origin + times[-1]
    return Batch(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_boot_id="boot-1",
        seq=seq,
        sent_at=sent_at,
        gpus=(info,),
        samples=samples,
    )


def start_collector(tmp_path: Path, db: Path, config: str = FAST_CONFIG) -> CollectorProcess:
    path = tmp_path / "collector.yaml"
    path.write_text(config)
    collector = CollectorProcess(path, free_port(), db, TOKEN, tmp_path / "collector.log")
    collector.start()
    return collector


def post(collector: CollectorProcess, batch: Batch) -> httpx.Response:
    body = msgspec.json.encode(batch)
    return httpx.post(collector.url + "/v1/batches", content=body, headers=AUTH, timeout=10)


def gpu_energy(db: Path) -> dict[str, float]:
    """GPU uuid -> all-time energy in the ledger (read-only: the collector may run)."""
    return dict(_rows(db, "SELECT gpu_uuid, energy_joules FROM gpu_usage_total"))


def workload_energy(db: Path) -> dict[str, float]:
    return dict(_rows(db, "SELECT workload_key, energy_joules FROM workload_usage_total"))


def _rows(db: Path, sql: str) -> list[tuple[str, float]]:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute(sql).fetchall()


def metric(collector: CollectorProcess, name: str, labels: str = "") -> float | None:
    """One sample of ``/metrics`` (``labels``: as exposed, e.g. ``reason="disk_full"``)."""
    text = httpx.get(collector.url + "/metrics", timeout=10).text
    pattern = re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)"
    found = re.search("^" + pattern + "$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def wait_for(what: str, condition: Callable[[], bool], within_seconds: float) -> float:
    """Poll ``condition`` until true; the seconds it took. Fails past ``within_seconds``
    (a bound the issue sets, not a speed measurement)."""
    start = time.monotonic()
    while not condition():
        elapsed = time.monotonic() - start
        assert elapsed < within_seconds, f"{what}: not within {within_seconds} s"
        time.sleep(0.1)
    return time.monotonic() - start
