"""One read request against a running collector, measured: wall latency, body bytes as
sent and uncompressed, and the collector's CPU for it.

CPU is read around each request from every thread of the collector
(``/proc/PID/task/TID/schedstat``: nanoseconds on a CPU) and from ``utime + stime`` of
``/proc/PID/stat`` (10 ms clock ticks: exact in sum, too coarse for one 2 ms request); the
tables give the first, ``--json`` both. The collector is otherwise idle (no batches), so
what it spends in the window is the request's.
"""

from __future__ import annotations

import gzip
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec

from bench.harness import TOKEN, cpu_seconds_of

AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: a request is timed to the last body byte; CPU is read again this much later, so the
#: server's own bookkeeping after the last byte is counted with its request
SETTLE_SECONDS = 0.003
IDENTITY = {"Accept-Encoding": "identity"}


@dataclass(frozen=True)
class Endpoint:
    """``name`` as the table shows it; ``optional``: the tree may not serve it (probed)."""

    name: str
    path: str
    headers: Mapping[str, str] = field(default_factory=lambda: dict(IDENTITY))
    optional: bool = False
    conditional: bool = False  # If-None-Match: the last ETag /v1/fleet answered
    paged: bool = False  # served when the answer is a page, not the whole fleet


def endpoints() -> list[Endpoint]:
    gzip_ok = {"Accept-Encoding": "gzip"}
    return [
        Endpoint("GET /metrics", "/metrics"),
        Endpoint("GET /metrics (gzip)", "/metrics", gzip_ok),
        Endpoint("GET /v1/gpus/usage", "/v1/gpus/usage"),
        Endpoint("GET /v1/workloads (whole range)", "/v1/workloads?start=0"),
        Endpoint("GET /v1/fleet", "/v1/fleet"),
        Endpoint("GET /v1/recommendations", "/v1/recommendations"),
        Endpoint("GET /v1/fleet/summary", "/v1/fleet/summary", optional=True),
        Endpoint("GET /v1/fleet?limit=200", "/v1/fleet?limit=200", IDENTITY, True, paged=True),
        Endpoint("GET /v1/fleet (If-None-Match)", "/v1/fleet", IDENTITY, True, conditional=True),
        Endpoint(
            "GET /v1/gpus/usage?limit=200", "/v1/gpus/usage?limit=200", IDENTITY, True, paged=True
        ),
    ]


@dataclass(frozen=True)
class Measured:
    status: int
    latency_seconds: float
    sent_bytes: int
    body_bytes: int
    cpu_seconds: float  # schedstat, every thread
    tick_cpu_seconds: float  # utime + stime
    etag: str | None
    body: bytes = field(repr=False, default=b"")


def thread_cpu_seconds(pid: int) -> float:
    """CPU seconds the process's live threads have run (schedstat's first field, ns)."""
    total_ns = 0
    task_dir = Path(f"/proc/{pid}/task")
    for tid in os.listdir(task_dir):
        try:
            total_ns += int((task_dir / tid / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended between listing and reading
    return total_ns / 1e9


def measure(client: httpx.Client, base: str, pid: int, ep: Endpoint, etag: str | None) -> Measured:
    """GET ``ep`` once; ``etag`` is sent as If-None-Match when ``ep`` is conditional."""
    headers = {**AUTH, **ep.headers}
    if ep.conditional and etag:
        headers["If-None-Match"] = etag
    ticks, cpu = cpu_seconds_of(pid), thread_cpu_seconds(pid)
    start = time.perf_counter()
    with client.stream("GET", base + ep.path, headers=headers) as response:
        raw = b"".join(response.iter_raw())
    latency = time.perf_counter() - start
    time.sleep(SETTLE_SECONDS)
    cpu, ticks = thread_cpu_seconds(pid) - cpu, cpu_seconds_of(pid) - ticks
    gzipped = response.headers.get("content-encoding", "").lower() == "gzip"
    body = gzip.decompress(raw) if gzipped and raw else raw
    return Measured(response.status_code, latency, len(raw), len(body), cpu, ticks,
                    response.headers.get("etag"), body)  # fmt: skip


def serves(ep: Endpoint, first: Measured, fleet_gpus: int) -> bool:
    """Whether a tree serves ``ep``, from its first answer: 200 (304 when conditional),
    and for a paged endpoint a page (fewer GPUs than the fleet, or a cursor to the next)."""
    if ep.conditional:
        return first.status == 304
    if first.status != 200:
        return False
    if not ep.paged:
        return True
    answer = msgspec.json.decode(first.body)
    return _page_marked(answer) or len(_gpus(answer)) < fleet_gpus


def _gpus(answer: Any) -> list[Any]:
    if isinstance(answer, list):
        return answer
    found = answer.get("gpus", []) if isinstance(answer, dict) else []
    return found if isinstance(found, list) else []


def _page_marked(answer: Any) -> bool:
    return isinstance(answer, dict) and any("cursor" in key for key in answer)
