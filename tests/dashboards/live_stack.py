"""A running ``gpufleet demo`` scraped by a real Prometheus, for the live dashboard tests.

The demo runs as a subprocess (collector on port P, simulated agents with dcgm-exporter
names on P+1..P+7, three of them pathology nodes); Prometheus (Debian package) scrapes them
every second with our rules loaded, on a loopback port, with its TSDB in a temporary
directory.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.dashboards.queries import ROOT, RULES

NODES = 4
#: and the demo's first pathology nodes (--pathologies): every bottleneck verdict and
#: broken GPUs (XIDs and ECC on the second, a GPU off the bus on the third: a node short
#: of GPUs), for the "Why it wastes" panels
PATHOLOGY_NODES = 3
AGENTS = NODES + PATHOLOGY_NODES
#: the third pathology node's faulted job (plan.PATHOLOGY_FLAVOURS[2], Slot(_FAULT): one
#: GPU) has fallen off the bus (pathology.falls_off_bus): NVML answers GPU_IS_LOST, so
#: it has no temperature and its node is one GPU short
OFF_BUS_GPUS = 1
#: every node has 8 GPUs (the demo's default --gpus-per-node, the pathology nodes' size)
GPUS = 8 * AGENTS
HOST = "127.0.0.1"
#: simulated seconds per wall second. The demo ships every ~30 simulated seconds and a GPU
#: turns unknown three batch intervals late, so 600x works too (measured: 99 passed in
#: 10-12 s idle, 15-17 s with a core busy) but is no faster (start-up dominates) and leaves
#: 0.6 wall seconds of slack before GPUs read "unknown"; 5x leaves 12 s on a loaded machine
SPEED = 5


def free_port_block(size: int) -> int:
    """A port P with P..P+size-1 all free on 127.0.0.1."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + size < 65000 and all(_free(base + i) for i in range(size)):
            return base
    raise RuntimeError("no free block of ports")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def prometheus_config(port: int) -> str:
    agents = ", ".join(f"'127.0.0.1:{port + 1 + i}'" for i in range(AGENTS))
    return (
        "global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}\n"
        f"rule_files: ['{RULES}']\n"
        "scrape_configs:\n"
        f"  - {{job_name: gpufleet-collector, static_configs: [{{targets: ['{HOST}:{port}']}}]}}\n"
        f"  - {{job_name: gpufleet-agent, static_configs: [{{targets: [{agents}]}}]}}\n"
    )


@dataclass
class Prometheus:
    url: str
    client: httpx.Client

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query, now or at Unix time ``at``."""
        params: dict[str, Any] = {"query": expr} if at is None else {"query": expr, "time": at}
        body = self._get("/api/v1/query", params)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def query_range(self, expr: str, seconds: float, step: str = "2s") -> list[dict[str, Any]]:
        now = time.time()
        params = {"query": expr, "start": now - seconds, "end": now, "step": step}
        result: list[dict[str, Any]] = self._get("/api/v1/query_range", params)["data"]["result"]
        return result

    def label_values(self, selector: str, label: str) -> list[str]:
        params = {"match[]": selector, "start": time.time() - 300}
        series = self._get("/api/v1/series", params)["data"]
        return sorted({s[label] for s in series if s.get(label)})

    def _get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        response = self.client.get(path, params=params)
        body: dict[str, Any] = response.json()
        assert body.get("status") == "success", f"{params}: {body}"
        return body


def _wait(check: Any, timeout_seconds: float, what: str) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        with suppress(httpx.HTTPError, AssertionError, KeyError):
            if check():
                return
        time.sleep(0.5)
    raise TimeoutError(f"gave up waiting for {what}")


@contextmanager
def _process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _demo_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "gpufleet", "demo", "--plain", "--duration", "300",
            "--port", str(port), "--speed", str(SPEED), "--history", "2",
            "--nodes", str(NODES), "--pathologies", str(PATHOLOGY_NODES)]  # fmt: skip


def _prometheus_argv(config: Path, data: Path, port: int) -> list[str]:
    return ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]  # fmt: skip


@contextmanager
def live_stack(workdir: Path) -> Iterator[Prometheus]:
    port = free_port_block(AGENTS + 1)
    prom_port = free_port_block(1)
    config = workdir / "prometheus.yml"
    config.write_text(prometheus_config(port))
    with (
        _process(_demo_argv(port), workdir / "demo.log"),
        _process(_prometheus_argv(config, workdir / "tsdb", prom_port), workdir / "prom.log"),
        httpx.Client(base_url=f"http://127.0.0.1:{prom_port}", timeout=10) as client,
    ):
        prom = Prometheus(f"http://127.0.0.1:{prom_port}", client)
        _wait(lambda: client.get("/-/ready").status_code == 200, 30, "Prometheus ready")
        _wait(lambda: _targets_up(prom), 60, "demo targets up")
        _wait(lambda: _enough_data(prom), 60, "rates over the demo's metrics")
        yield prom


def _targets_up(prom: Prometheus) -> bool:
    return len(prom.query("up == 1")) == AGENTS + 1


def _enough_data(prom: Prometheus) -> bool:
    """Counters have moved between scrapes and the rules have been evaluated since."""
    checks = (
        "sum(rate(gpufleet_workload_waste_total[30s])) > 0",
        "sum(rate(gpufleet_workload_energy_joules_total[30s])) > 0",
        "sum(rate(gpufleet_gpu_energy_joules_total[30s])) > 0",
        'gpufleet_fleet_gpus{state="allocated_idle"} > 0',
        "gpufleet_fleet_utilisation_ratio",
        "gpufleet_recommendation_savings_per_month",
        "gpufleet:fleet_waste_per_hour:rate5m > 0",
        "gpufleet:carbon_intensity_grams_per_kilowatt_hour:rate1h > 0",
        "gpufleet:gpu_energy_counter_disagreement:ratio10m",
    )
    return all(prom.query(expr) for expr in checks)


def escape_regex(value: str) -> str:
    """A value as Grafana puts it into a ``=~`` matcher: regex-escaped, PromQL-quoted."""
    return re.sub(r"([\\.+*?^$()\[\]{}|])", r"\\\\\1", value)
