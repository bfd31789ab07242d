"""``gpufleet demo --duration N --plain --port P`` as a user runs it, in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from tests.e2e.collector_process import ROOT
from tests.ports import free_port_block

pytestmark = pytest.mark.slow

NODES = 4  # the demo's default fleet: the collector on P, one agent per node on P+1..P+4


def metrics_while_running(proc: subprocess.Popen[str], wanted: dict[str, str]) -> set[str]:
    """Scrape each URL until it answers 200 with its wanted metric name (an agent answers
    before its first sample without GPU series); stops when all did or the demo exited."""
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while len(seen) < len(wanted) and proc.poll() is None and time.monotonic() < deadline:
        for url, name in wanted.items():
            try:
                response = httpx.get(url, timeout=2.0)
            except httpx.HTTPError:
                continue
            if response.status_code == 200 and f"\n{name}{{" in response.text:
                seen.add(url)
        time.sleep(0.1)
    return seen


def test_demo_runs_prints_its_summary_and_serves_metrics_while_running() -> None:
    port = free_port_block(1 + NODES)
    collector_metrics = f"http://127.0.0.1:{port}/metrics"
    agent_metrics = f"http://127.0.0.1:{port + 1}/metrics"
    command = [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "demo",
               "--duration", "4", "--plain", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        wanted = {
            collector_metrics: "gpufleet_fleet_gpus",
            agent_metrics: "gpufleet_gpu_power_watts",
        }
        seen = metrics_while_running(proc, wanted)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert seen == set(wanted), err
    assert f"collector   http://127.0.0.1:{port}" in out
    assert "GPUs               32:" in out
    assert "Open recommendations" in out
    # an hour of history: the stuck jobs have been idle past the 30 min window; every node
    # runs work, so its idle free GPUs are no scale-down (and 13 H100s held on 16 leave no
    # node to free by consolidating either)
    assert "release_idle" in out
    assert "scale_down" not in out and "consolidate" not in out
    assert "Traceback" not in err
