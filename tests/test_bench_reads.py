"""bench/collector_reads.py must not rot: ``--quick`` (16 GPUs, 3 requests per endpoint)
runs both code trees end to end; and the pieces that judge figures are checked on figures
computed by hand. No timing is asserted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.read_feed import history_seconds
from bench.read_requests import Endpoint, Measured, serves, thread_cpu_seconds
from bench.report_reads import Stats, body_text, target_lines

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"[0-9][0-9,.]*"
ALWAYS = (
    "GET /metrics",
    "GET /metrics (gzip)",
    "GET /v1/gpus/usage",
    "GET /v1/workloads (whole range)",
    "GET /v1/fleet",
    "GET /v1/recommendations",
)


@pytest.mark.slow
def test_collector_reads_quick_reads_every_endpoint_of_both_trees(tmp_path: Path) -> None:
    out_json = tmp_path / "reads.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.collector_reads", "--quick", "--json", str(out_json)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for name in ALWAYS:  # before ms, body, CPU ms, after ms, body, CPU ms, two ratios
        cells = rf"{NUMBER}\s+{NUMBER} k?B(?: \({NUMBER} kB\))?\s+{NUMBER}"
        row = rf"^{re.escape(name)}\s+{cells}\s+{cells}\s+{NUMBER}x\s+{NUMBER}x\s*$"
        assert re.search(row, out, re.MULTILINE), f"no {name} row in:\n{out}"
    console = rf"^console fleet page ready\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x"
    assert re.search(console, out, re.M) or "console fleet page: skipped" in out, out
    assert len(re.findall(r"^  .*: (?:met|not met|not measured)", out, re.MULTILINE)) == 6, out

    size = json.loads(out_json.read_text())["sizes"][0]
    # 16 GPUs x 20 s at 1 Hz; 2 nodes shipping every 5 s, staggered: node 0 at seconds
    # 4, 9, 14, 19, node 1 at 3, 8, 13, 18 and its rest at 19
    assert (size["gpus"], size["history"]["samples"], size["history"]["batches"]) == (16, 320, 9)
    for name in ALWAYS:
        for label in ("before", "after"):
            figures = size["endpoints"][name][label]
            assert figures["requests"] == 3 and figures["statuses"] == {"200": 3}, figures
            assert figures["body_bytes"] > 0 and figures["cpu_ms"] > 0, figures
            assert 0 < figures["sent_bytes"] <= figures["body_bytes"], figures


def test_history_is_capped_by_the_sample_budget_but_keeps_two_batches() -> None:
    assert history_seconds(1_000, 600, 1_200_000) == 600
    assert history_seconds(10_000, 600, 1_200_000) == 120
    assert history_seconds(100_000, 600, 1_200_000) == 12
    assert history_seconds(1_000_000, 600, 1_200_000) == 10  # two 5 s batches per node


def test_thread_cpu_counts_what_this_process_burns() -> None:
    before_s, process_before_s = thread_cpu_seconds(os.getpid()), time.process_time()
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    used_s = thread_cpu_seconds(os.getpid()) - before_s
    assert used_s == pytest.approx(time.process_time() - process_before_s, abs=0.02)


def measured(status: int, body: bytes, latency_ms: float = 1.0, cpu_ms: float = 1.0) -> Measured:
    return Measured(status, latency_ms / 1e3, len(body), len(body), cpu_ms / 1e3, 0.0, None, body)


def test_a_paged_endpoint_is_served_only_when_it_answers_a_page() -> None:
    page = Endpoint("page", "/v1/fleet?limit=200", paged=True)
    whole = b'{"gpus": [{}, {}, {}]}'
    assert not serves(page, measured(200, whole), fleet_gpus=3)  # the limit ignored
    assert serves(page, measured(200, b'{"gpus": [{}, {}]}'), fleet_gpus=3)
    assert serves(page, measured(200, b'{"gpus": [{}], "next_cursor": "x"}'), fleet_gpus=1)
    assert not serves(page, measured(404, b"{}"), fleet_gpus=3)
    conditional = Endpoint("304", "/v1/fleet", conditional=True)
    assert serves(conditional, measured(304, b""), 3)
    assert not serves(conditional, measured(200, whole), 3)


def test_targets_are_judged_on_the_after_tree() -> None:
    def stats(latency_ms: float, cpu_ms: float, status: int = 200) -> Stats:
        return Stats(20, {status: 20}, latency_ms, 10, 10, cpu_ms, cpu_ms)

    table = {
        "GET /metrics": {"before": stats(1400, 1300), "after": stats(30, 99.0)},
        "GET /metrics (gzip)": {"before": stats(1400, 1300), "after": stats(30, 101.0)},
        "GET /v1/fleet/summary": {"before": None, "after": stats(19.9, 5)},
        "GET /v1/fleet?limit=200": {"before": None, "after": None},
        "GET /v1/fleet (If-None-Match)": {"before": None, "after": stats(1.5, 1, status=304)},
    }
    assert target_lines(table, {"after": [0.9, 1.2, 0.8]}) == [
        "/metrics: collector CPU per scrape <= 100 ms: met (99 ms)",
        "/metrics (gzip): CPU per scrape <= 100 ms: not met (101 ms)",
        "/v1/fleet summary < 20 ms: met (19.9 ms)",
        "/v1/fleet 200-GPU page < 20 ms: not met (not served)",
        "a 304 < 2 ms: met (1.5 ms)",
        "console fleet page ready <= 1 s: met (900 ms)",
    ]
    unjudged = target_lines(None, None)
    assert unjudged[0] == "/metrics: collector CPU per scrape <= 100 ms: not measured"


def test_a_body_names_its_uncompressed_size_when_sent_compressed() -> None:
    assert body_text(Stats(1, {200: 1}, 1.0, 95_000, 730_000, 1.0, 1.0)) == "95 kB (730 kB)"
    assert body_text(Stats(1, {200: 1}, 1.0, 7_200_000, 7_200_000, 1.0, 1.0)) == "7.2 MB"
    assert body_text(Stats(1, {304: 1}, 1.0, 0, 0, 1.0, 1.0)) == "0 B"
