"""The benchmarks must not rot: each runs with ``--quick`` and prints its figures.

No timing is asserted (the machine's speed is not the code's); what is checked is that the
whole loop ran and that its own bookkeeping adds up: every sample the agent took reached
the batch sink, and the collector applied every sample it ingested.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"[0-9][0-9,.]*"


def run_quick(module: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_agent_overhead_quick_prints_cpu_and_memory_per_configuration() -> None:
    out = run_quick("bench.agent_overhead")
    for source in ("simulated", "nvml"):
        for dcgm, host in (("off", "off"), ("off", "on"), ("on", "on")):
            # 30 ticks x 8 GPUs were sampled and all 240 samples reached the sink
            row = rf"^{source}\s+{dcgm}\s+{host}\s+240\s+({NUMBER})\s+1\s+({NUMBER})x\s.*\s240\s*$"
            assert re.search(row, out, re.MULTILINE), f"no {source}/{dcgm}/{host} row in:\n{out}"
        assert f"dcgm_compat cost ({source}):" in out
        assert f"host_usage cost ({source}):" in out
        assert re.search(rf"^fresh agent loop, {source}, .*\s{NUMBER}x\s*$", out, re.MULTILINE)
    assert re.search(rf"^this benchmark process .*\s{NUMBER}x\s*$", out, re.MULTILINE)
    assert "dcgm-exporter pods run at 135-512 MiB" in out


def test_agent_peers_quick_runs_every_tool_over_the_fake_nvml() -> None:
    """The peers are the bench extra (also in dev); without them there is nothing to compare."""
    pytest.importorskip("nvitop", reason="nvitop not installed (pip install -e '.[bench]')")
    pytest.importorskip("gpustat", reason="gpustat not installed (pip install -e '.[bench]')")
    out = run_quick("bench.agent_peers")
    for tool in ("gpufleet", "nvitop getters", "nvitop as_snapshot", "gpustat"):
        # 20 polls x 8 GPUs, a CPU figure, its fake-library share, and NVML calls per poll
        row = rf"^1\s+{tool}\s+160\s+{NUMBER}\s+{NUMBER}\s+-?{NUMBER}\s+{NUMBER}\s+{NUMBER}\s*$"
        assert re.search(row, out, re.MULTILINE), f"no {tool} row in:\n{out}"
    # every tool read the fake GPUs' memory and power through the binding
    assert re.search(r"^memory\.used\s+x\s+x\s+x\s+x\s*$", out, re.MULTILINE), out
    assert re.search(r"^power\.draw\s+x\s+x\s+x\s+x\s*$", out, re.MULTILINE), out
    assert re.search(r"^utilization\.encoder/decoder\s+x\s+x\s+x\s*$", out, re.MULTILINE), out
    for peer in ("nvitop getters", "nvitop as_snapshot", "gpustat"):
        assert f"{peer}: fields gpufleet does not read: none" in out


@pytest.mark.slow
def test_collector_throughput_quick_prints_throughput_memory_and_prometheus() -> None:
    out = run_quick("bench.collector_throughput")
    # 16 GPUs x 35 s and 48 GPUs x 35 s went through, none lost (applied == ingested)
    assert re.search(
        rf"^16\s+560\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x", out, re.MULTILINE
    ), out
    assert re.search(
        rf"^48\s+1,680\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x", out, re.MULTILINE
    ), out
    assert "WARNING" not in out
    assert "ingest" in out and "tick" in out and "evaluate" in out
    if shutil.which("prometheus") is None:
        assert "Prometheus: skipped" in out
    else:
        # a quick run may leave Prometheus under the CPU clock's 10 ms tick: no ratio then
        ratio = rf"(?:{NUMBER}x|n/a \(Prometheus CPU below clock tick\))"
        row = rf"^48\s+{NUMBER}\s+{NUMBER}\s+{ratio}\s+{NUMBER}\s+{ratio}\s+{NUMBER}"
        assert re.search(row, out, re.MULTILINE), out


@pytest.mark.slow
def test_collector_http_quick_posts_through_the_real_collector_and_prints_its_cpu() -> None:
    out = run_quick("bench.collector_http")
    # 16 GPUs (2 nodes, staggered batches): the batches arriving in seconds 3..14 hold 240
    # samples in 7 POSTs, all answered 200 and all applied (pending_samples 0 on /healthz)
    row = rf"^16\s+2\s+FULL\s+5\s+240\s+7\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x\s+{NUMBER}"
    assert re.search(row, out, re.MULTILINE), out


@pytest.mark.slow
def test_collector_instructions_quick_counts_the_pipeline_under_callgrind() -> None:
    """valgrind is in scripts/debian-packages.txt; the child applied all 16 x 20 samples
    (it raises otherwise), and the count is a plausible size for that work."""
    out = run_quick("bench.collector_instructions")
    row = re.search(rf"^16\s+this checkout\s+320\s+({NUMBER})\s+({NUMBER})\s*$", out, re.MULTILINE)
    assert row, out
    per_sample = int(row.group(2).replace(",", ""))
    assert 1_000 < per_sample < 10_000_000, out


@pytest.mark.slow
def test_collector_load_quick_ramps_agents_and_reports_the_knee_and_the_rss_ceiling() -> None:
    """Two ramp steps (2 and 4 agents of 8 GPUs, 2 batches each) and the 10x step; every
    batch of the ramp was answered (200, or 429 when shed), none failed otherwise."""
    out = run_quick("bench.collector_load")
    for step, agents in (("1", 2), ("2", 4)):
        line = rf"^{step}\s+{agents}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+0\s"
        assert re.search(line, out, re.MULTILINE), out
    assert re.search(rf"^10x knee\s+{NUMBER}\s+.*\s0\s+{NUMBER}\s+{NUMBER}\s*$", out, re.M), out
    assert re.search(rf"^knee: {NUMBER} agents, {NUMBER} GPU-samples/s accepted", out, re.M), out
    assert re.search(rf"ceiling {NUMBER} MiB: within", out), out
    assert "refused by reason: limit_exceeded" in out, out  # the 10x step: 320 GPUs > 64


def test_collector_metrics_quick_prints_cpu_per_scrape_and_render() -> None:
    """200 GPUs: a body with at least each GPU's state and idle series, and one CPU figure
    per kind of scrape."""
    out = run_quick("bench.collector_metrics")
    lines = re.search(r"exposition lines \{'this checkout': (\d+)\}", out)
    assert lines and int(lines.group(1)) > 2 * 200, out
    for figure in ("cached scrape", "cached scrape, gzip", "re-render after apply",
                   "re-render after commit"):  # fmt: skip
        assert re.search(rf"^{figure}\s+{NUMBER}\s*$", out, re.MULTILINE), out


def test_collector_ledger_quick_prints_sqlite_and_postgresql_side_by_side() -> None:
    out = run_quick("bench.collector_ledger")
    for backend in ("sqlite", "postgresql"):
        # 80 GPUs x 20 s went through each ledger, every sample applied
        assert re.search(rf"^{backend}\s+80\s+1,600\s+1,600\s", out, re.MULTILINE), out
    server = rf"^postgresql\s.*\s{NUMBER}\s+{NUMBER}x \(target <= 0.5x\)\s*$"
    assert re.search(server, out, re.MULTILINE), out


@pytest.mark.slow
def test_collector_replicas_quick_prints_each_process_each_setup_and_the_plan() -> None:
    """80 GPUs x 20 s through each setup: every sample ingested and applied, the 2
    replicas splitting the fleet's batches and the 64 shards between them, one leading;
    PostgreSQL's CPU beside each PostgreSQL setup; cores planned for the three sizes."""
    out = run_quick("bench.collector_replicas")
    for setup in ("sqlite", "postgresql", "1 replica", "2 replicas"):
        row = rf"^{setup}\s+80\s+1,600\s+1,600\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s"
        assert re.search(row, out, re.MULTILINE), out
    assert re.search(r"^1 replica\s+80\s+0 leader\s+64\s+1,600\s+1,600\s+48\s", out, re.M), out
    halves = re.findall(
        r"^2 replicas\s+80\s+[01]( leader)?\s+32\s+800\s+([0-9,]+)\s+24\s", out, re.M
    )
    assert sorted(h[0] for h in halves) == ["", " leader"], out
    assert sum(int(h[1].replace(",", "")) for h in halves) == 1_600, out
    server = rf"^2 replicas\s.*\s{NUMBER}x \(target <= 1.5x\)\s+{NUMBER}\s+{NUMBER}x \(target"
    assert re.search(server, out, re.MULTILINE), out
    for gpus in ("10,000", "100,000", "300,000"):
        assert re.search(rf"^{gpus}\s+{gpus}\s+{NUMBER}\s+{NUMBER}\s+\d+\s+{NUMBER}\s*$", out, re.M)
    assert "WARNING" not in out


def test_kube_enrich_quick_prints_the_three_columns_and_their_ratio() -> None:
    out = run_quick("bench.kube_enrich")
    assert "800 pods, 100 batches of 8 GPUs" in out
    row = rf"^({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})x\s*$"
    assert re.search(row, out, re.MULTILINE), out
