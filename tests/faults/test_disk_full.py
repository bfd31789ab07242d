"""Readiness tells the truth about a full disk: false within 30 s of the write path failing,
true again within 30 s of space coming back, and ``/healthz`` and ``/metrics`` say so.

Issue 17, defect 2: ``/healthz`` answered 200 ``ledger_ok: true`` and
``gpufleet_collector_ledger_up`` stayed 1 while SQLite had no space left and every POST was
answered 503. Here the real ``gpufleet collector`` runs on a 4 MiB tmpfs holding its ledger
and intake log; the test fills it, resends a batch as an agent would (each answered 503),
then frees the space. At FULL a segment is 8 MiB of zeros, more than the whole volume, so the
collector runs at ``ledger.synchronous: NORMAL``: its segments grow as batches come.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.faults.volume import fill, tmpfs
from tests.faults.write_rig import (
    FAST_CONFIG,
    WATTS,
    gpu_energy,
    metric,
    node_batch,
    post,
    start_collector,
    wait_for,
)

#: the issue's bound: readiness follows the write path within this many seconds
WITHIN_SECONDS = 30.0


def ready(url: str) -> bool:
    return httpx.get(url + "/readyz", timeout=5).status_code == 200


def test_readiness_goes_false_on_a_full_disk_and_true_once_space_is_freed(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "vol", 4 * 1024 * 1024) as vol:
        db, origin = vol / "ledger.db", time.time() - 300
        config = FAST_CONFIG + "ledger:\n  synchronous: NORMAL\n"
        collector = start_collector(tmp_path, db, config)
        try:
            assert post(collector, node_batch("a", 1, origin, range(0, 110, 10))).is_success
            wait_for("the first batch committed", lambda: bool(gpu_energy(db)), WITHIN_SECONDS)
            assert ready(collector.url) and httpx.get(collector.url + "/livez").is_success
            filler = fill(vol)
            # before any write fails: the next commit may be a minute away, and at FULL
            # appends go to a segment zero-filled in advance; the free space says it now
            wait_for("not ready on a full disk", lambda: not ready(collector.url), WITHIN_SECONDS)
            resend = node_batch("a", 2, origin, range(110, 210, 10), memory=1 << 31)
            wait_for(
                "the batch refused",
                lambda: post(collector, resend).status_code == 503,
                WITHIN_SECONDS,
            )
            for _ in range(5):  # an agent's retries: each answered, one ERROR for the streak
                assert post(collector, resend).status_code == 503
            readyz = httpx.get(collector.url + "/readyz", timeout=5)
            health = httpx.get(collector.url + "/healthz", timeout=5)
            assert readyz.status_code == 503 and health.status_code == 503
            problems = readyz.json()["problems"]
            assert any("bytes free" in p and "free space on it" in p for p in problems), problems
            assert any("intake log could not store" in p and "disk_full" in p for p in problems)
            assert health.json()["ledger_ok"] is False
            assert metric(collector, "gpufleet_collector_ready") == 0
            assert metric(collector, "gpufleet_collector_ledger_up") == 0
            failures = metric(
                collector, "gpufleet_collector_intake_write_failures_total", 'reason="disk_full"'
            )
            assert failures is not None and failures >= 1
            assert httpx.get(collector.url + "/livez").is_success  # alive: do not restart it
            filler.unlink()

            def stored_and_ready() -> bool:  # the agent keeps resending until acked
                return post(collector, resend).is_success and ready(collector.url)

            wait_for("ready once space is freed", stored_and_ready, WITHIN_SECONDS)
            wait_for(
                "the resent batch committed",
                lambda: gpu_energy(db).get("GPU-a", 0) >= WATTS * 200,
                WITHIN_SECONDS,
            )
            assert metric(collector, "gpufleet_collector_ready") == 1
            assert metric(collector, "gpufleet_collector_ledger_up") == 1
        finally:
            collector.stop_if_running()
        assert gpu_energy(db) == {"GPU-a": WATTS * 200}  # nothing lost, nothing twice
        log = collector.log.read_text(errors="replace")
        assert log.count("storing a batch failed") == 1, log[-4000:]
