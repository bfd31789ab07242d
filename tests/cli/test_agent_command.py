"""`gpufleet agent` as a user runs it: --once, bad config, no NVML, SIGTERM flushing the spool."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def gpufleet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufleet", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_once_prints_every_gpu_as_json() -> None:
    out = gpufleet("agent", "--source", "simulated", "--once", "--node", "n1")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report) == 8
    first = report[0]
    assert first["gpu"]["uuid"].startswith("GPU-")
    assert first["sample"]["gpu_uuid"] == first["gpu"]["uuid"]
    assert 0 < first["sample"]["power_watts"] <= 700
    assert first["sample"]["energy_joules"] > 0


def test_a_replayed_trace_starts_now() -> None:
    """A 2022 trace replayed by the agent reads from its first point on at start-up (its
    times shifted to now); unshifted, every GPU read nothing."""
    trace = Path(__file__).parents[1] / "fixtures" / "replay" / "alibaba-genai-2026-7pods.tar.gz"
    out = gpufleet("agent", "--source", "replay", "--trace", str(trace), "--once", "--node", "r1")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report) == 7
    reading = [r["sample"] for r in report if r["sample"] is not None]
    assert len(reading) == 6  # one pod starts 21.7 h into the trace
    assert all(abs(s["timestamp"] - time.time()) < 60 for s in reading)
    assert all(s["workloads"][0]["namespace"] == "alibaba-genai" for s in reading)


def test_environment_overrides_the_source() -> None:
    out = gpufleet("agent", "--once", env={"GPUFLEET_SOURCE__KIND": "simulated",
                                           "GPUFLEET_SOURCE__SIMULATED_GPUS": "2"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)) == 2


def test_a_bad_config_names_the_key_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("source:\n  interval_seconds: soon\n")
    out = gpufleet("agent", "--config", str(config), "--once")
    assert out.returncode == 2
    assert "source.interval_seconds" in out.stderr and "'soon'" in out.stderr
    assert "Traceback" not in out.stderr

    config.write_text("shipper:\n  urll: http://x\n")
    out = gpufleet("agent", "--config", str(config), "--once")
    assert out.returncode == 2 and "shipper.urll: unknown key" in out.stderr


def test_missing_nvml_is_a_clear_error() -> None:
    # no NVIDIA driver on this machine: libnvidia-ml.so.1 cannot be loaded
    out = gpufleet("agent", "--source", "nvml", "--once")
    assert out.returncode == 1
    assert "cannot read GPUs" in out.stderr
    assert "Traceback" not in out.stderr


def test_sigterm_flushes_into_the_spool_and_exits_cleanly(tmp_path: Path) -> None:
    metrics_port, dead_port = free_port(), free_port()  # nothing listens on dead_port
    spool = tmp_path / "spool"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpufleet", "agent", "--source", "simulated", "--node", "n1",
         "--metrics-port", str(metrics_port), "--collector", f"http://127.0.0.1:{dead_port}",
         "--spool-dir", str(spool)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "GPUFLEET_SHIPPER__BATCH_INTERVAL_SECONDS": "60"},
    )  # fmt: skip
    try:
        body = _wait_for_metrics(metrics_port)
        assert "gpufleet_gpu_power_watts{" in body
        # the simulator's own host readings are wired in: its jobs' host CPU and memory
        assert "gpufleet_workload_host_memory_used_bytes{" in body
        time.sleep(1.5)  # a few ticks buffered; the 60 s batch interval has not passed
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    files = list(spool.glob("*.json.gz"))
    assert files, "the buffered samples must be in the spool after SIGTERM"
    samples = sum(int(f.name.split("_")[3].split(".")[0]) for f in files)
    assert samples >= 8  # at least one tick of 8 GPUs


def _wait_for_metrics(port: int) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1)
            if "gpufleet_gpu_power_watts{" in response.text:
                return response.text
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("the agent's /metrics never answered")
