"""A real ``gpufleet agent`` whose node clock is two days ahead, against a real
``gpufleet collector``: refused for future timestamps, it keeps every batch, says once why
and what to do, and delivers them all once the collector takes them.

The collector corrects a node clock up to a day off from each batch's ``sent_at``
(collector/fleet/clocks.py), so a clock 10 minutes ahead is accepted; past a day (a reset
RTC) the samples are refused with ``future_timestamp``, which is the case here. The agent
process runs on that clock through a ``sitecustomize`` that moves ``time.time`` (what
libfaketime does to a C program); nothing of the agent is replaced.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.collector_process import ROOT, CollectorProcess
from tests.ports import free_port_block

TOKEN = "clock-ahead-token"
AHEAD_SECONDS = 2 * 86400.0

CLOCK_SHIM = f"""
import time
_real_time = time.time
time.time = lambda: _real_time() + {AHEAD_SECONDS}
"""


def scrape(url: str) -> dict[str, float]:
    """name{labels} -> value of a /metrics page; {} while it does not answer."""
    try:
        text = httpx.get(url, timeout=2.0).text
    except httpx.TransportError:
        return {}
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "node")
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def wait_for(what: str, check: object, timeout_seconds: float = 30.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout_seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def start_agent(tmp_path: Path, collector_url: str, metrics_port: int) -> subprocess.Popen[str]:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(CLOCK_SHIM)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shim), str(ROOT)]),
        "GPUFLEET_SHIPPER__TOKEN": TOKEN,
        "GPUFLEET_SHIPPER__BATCH_INTERVAL_SECONDS": "0.3",
        "GPUFLEET_SHIPPER__INITIAL_BACKOFF_SECONDS": "0.2",
        "GPUFLEET_SHIPPER__MAX_BACKOFF_SECONDS": "0.4",
        "GPUFLEET_SOURCE__INTERVAL_SECONDS": "0.2",
        "GPUFLEET_SOURCE__SIMULATED_GPUS": "2",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "gpufleet", "agent", "--source", "simulated", "--node", "n1",
         "--metrics-port", str(metrics_port), "--collector", collector_url,
         "--spool-dir", str(tmp_path / "spool")],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_node_clock_two_days_ahead_loses_no_batch_and_says_why_once(tmp_path: Path) -> None:
    port = free_port_block(2)
    config, db = tmp_path / "collector.yaml", tmp_path / "ledger.db"
    config.write_text("")
    collector = CollectorProcess(config, port, db, TOKEN, tmp_path / "collector.log")
    collector.start()
    agent = start_agent(tmp_path, collector.url, port + 1)
    agent_metrics = f"http://127.0.0.1:{port + 1}/metrics"
    rejected = "gpufleet_collector_rejected_batches_total{reason=future_timestamp}"
    try:
        wait_for("3 refusals", lambda: scrape(collector.url + "/metrics").get(rejected, 0) >= 3)
        # the agent counts a refusal once it has read the answer, after the collector counted it
        held = "gpufleet_agent_batches_held_total{reason=future_timestamp}"
        wait_for("3 held", lambda: scrape(agent_metrics).get(held, 0) >= 3, 10.0)
        refused = scrape(agent_metrics)
        assert refused["gpufleet_agent_spool_dropped_batches_total{}"] == 0
        assert refused["gpufleet_agent_batches_sent_total{}"] == 0
        spooled = spool_samples(tmp_path / "spool")
        assert spooled > 0

        # The operator lets the collector take the backlog (or time catches up with it).
        collector.terminate()
        config.write_text("ingest:\n  future_tolerance_seconds: 259200\n")
        collector.start()
        wait_for(
            "the backlog delivered",
            lambda: scrape(agent_metrics).get("gpufleet_agent_samples_sent_total{}", 0) > spooled,
        )
        delivered = scrape(agent_metrics)
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=20)
        accepted = scrape(collector.url + "/metrics")
    finally:
        agent.kill()
        collector.stop_if_running()

    assert agent.returncode == 0, stderr
    assert delivered["gpufleet_agent_spool_dropped_samples_total{}"] == 0
    assert delivered.get("gpufleet_agent_batches_refused_total{reason=future_timestamp}") is None
    assert accepted["gpufleet_collector_samples_total{}"] >= spooled  # the refused ones too
    advice = [line for line in stderr.splitlines() if "s ahead of the collector's" in line]
    assert len(advice) == 1, stderr  # once for the streak, not once per batch
    assert " ERROR " in advice[0]
    # the collector's Date header has whole seconds (and uvicorn renews it once a second)
    said = re.search(
        r"the node's clock is (\d+) s ahead of the collector's: check chrony/NTP", advice[0]
    )
    assert said is not None, advice[0]
    assert abs(int(said.group(1)) - AHEAD_SECONDS) <= 2
    assert "is lost" not in stderr


def spool_samples(spool: Path) -> int:
    """Samples in the spool's batch files, from their names (spool.py's naming)."""
    return sum(int(f.name.split("_")[3].split(".")[0]) for f in spool.glob("*.json.gz"))
