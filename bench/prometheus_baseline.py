"""The baseline: a real Prometheus scraping the same synthetic fleet, and its CPU per sample.

A target in a subprocess serves the fleet of bench/synthetic_fleet.py as gpufleet metrics
(6 series per GPU) and moves to the next second of samples on every scrape. Prometheus
(Debian package ``prometheus``) runs on a loopback port with a temporary config
(scrape_interval 1s) and a temporary ``--storage.tsdb.path``. Its CPU is utime + stime from
/proc/PID/stat and the samples it ingested are ``prometheus_tsdb_head_samples_appended_total``
from its own /metrics, both taken after the first scrape landed and again at the end.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from bench.harness import (
    child_process,
    cpu_seconds_of,
    free_port,
    http_get,
    memory_bytes_of,
    python_module,
    wait_for_http,
)
from bench.synthetic_fleet import FleetGpu, SampleStream, build_gpus

#: (metric, type, GpuSample field) served per GPU
SERIES = (
    ("gpufleet_gpu_sm_activity_ratio", "gauge", "sm_activity"),
    ("gpufleet_gpu_dram_activity_ratio", "gauge", "dram_activity"),
    ("gpufleet_gpu_power_watts", "gauge", "power_watts"),
    ("gpufleet_gpu_energy_joules_total", "counter", "energy_joules"),
    ("gpufleet_gpu_temperature_celsius", "gauge", "temperature_celsius"),
    ("gpufleet_gpu_memory_used_bytes", "gauge", "memory_used_bytes"),
)
APPENDED = "prometheus_tsdb_head_samples_appended_total"


@dataclass(frozen=True)
class PrometheusRun:
    gpus: int
    wall_seconds: float
    cpu_seconds: float
    samples: int
    scrapes: int
    mean_scrape_seconds: float
    rss_bytes: int

    @property
    def cpu_seconds_per_million(self) -> float:
        return self.cpu_seconds * 1e6 / self.samples if self.samples else float("nan")


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def run_prometheus(binary: str, gpus: int, seconds: float, start_unix: float) -> PrometheusRun:
    """Scrape the fleet for ``seconds`` of wall time; Prometheus' CPU and samples over it."""
    target_port, web_port = free_port(), free_port()
    web = f"http://127.0.0.1:{web_port}"
    target = python_module(
        "bench.collector_throughput",
        "--serve-target",
        str(target_port),
        "--gpus",
        str(gpus),
        "--start-unix",
        repr(start_unix),
    )
    with tempfile.TemporaryDirectory(prefix="bench-prometheus-") as tmp, child_process(target):
        wait_for_http(f"http://127.0.0.1:{target_port}/healthz")
        config = Path(tmp) / "prometheus.yml"
        config.write_text(_config(target_port))
        args = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp}/data",
            f"--web.listen-address=127.0.0.1:{web_port}",
            "--log.level=error",
            "--scrape.discovery-reload-interval=100ms",
        ]
        with child_process(args) as prometheus:
            wait_for_http(web + "/-/ready", timeout_seconds=60)
            first = _wait_for_samples(web, timeout_seconds=60)
            cpu0, t0 = cpu_seconds_of(prometheus.pid), time.monotonic()
            time.sleep(seconds)
            samples, cpu1 = _appended(web), cpu_seconds_of(prometheus.pid)
            wall = time.monotonic() - t0
            scrapes, mean = _scrape_health(web, wall)
            rss, _ = memory_bytes_of(prometheus.pid)
    return PrometheusRun(gpus, wall, cpu1 - cpu0, samples - first, scrapes, mean, rss)


def _config(target_port: int) -> str:
    return (
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: gpufleet\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )


def _appended(web: str) -> int:
    total = 0.0
    for line in http_get(web + "/metrics").splitlines():
        if line.startswith(APPENDED):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _wait_for_samples(web: str, timeout_seconds: float) -> int:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        appended = _appended(web)
        if appended > 0:
            return appended
        time.sleep(0.1)
    raise TimeoutError(f"Prometheus at {web} ingested nothing in {timeout_seconds} s")


def _scrape_health(web: str, window_seconds: float) -> tuple[int, float]:
    """(successful scrapes, mean scrape duration) over the last ``window_seconds``."""
    window = f"{max(1, round(window_seconds))}s"
    scrapes = _query(web, f"sum_over_time(up[{window}])")
    mean = _query(web, f"avg_over_time(scrape_duration_seconds[{window}])")
    return int(scrapes), mean


def _query(web: str, expr: str) -> float:
    answer = json.loads(http_get(f"{web}/api/v1/query?query={urllib.parse.quote(expr)}"))
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else float("nan")


# -- the scrape target (runs in a subprocess) ------------------------------------------------


class FleetExposition:
    """The text exposition of the fleet, one second further on every call."""

    def __init__(self, gpus: list[FleetGpu], start_unix: float) -> None:
        self._stream = SampleStream(gpus, start_unix)
        self._second = 0
        self._labels = [_labels(gpu) for gpu in gpus]

    def render(self) -> bytes:
        samples = self._stream.samples_at(self._second)
        self._second += 1
        lines: list[str] = []
        for metric, kind, field in SERIES:
            lines += [f"# HELP {metric} gpufleet benchmark fleet.", f"# TYPE {metric} {kind}"]
            for labels, sample in zip(self._labels, samples, strict=True):
                value = getattr(sample, field)
                if value is not None:
                    lines.append(f"{metric}{{{labels}}} {value}")
        lines.append("")
        return "\n".join(lines).encode()


def _labels(gpu: FleetGpu) -> str:
    workload = gpu.workloads[0] if gpu.workloads else None
    namespace = workload.namespace if workload else ""
    pod = workload.name if workload else ""
    return (
        f'node="{gpu.node}",gpu="{gpu.info.index}",uuid="{gpu.info.uuid}",'
        f'model_name="{gpu.info.name}",k8s_namespace_name="{namespace or ""}",'
        f'k8s_pod_name="{pod or ""}"'
    )


def serve_target(port: int, gpus: int, start_unix: float) -> None:
    exposition = FleetExposition(build_gpus(gpus), start_unix)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exposition.render() if self.path.startswith("/metrics") else b"ok\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # Prometheus stopped
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
