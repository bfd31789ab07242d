"""The collector's scheduled jobs when one is slower than its interval: it runs back to
back, never two at once, and no run is skipped.

The apply job is slowed the way a slow dependency slows it in production: a ledger
observer (as the InfluxDB sink is one) that takes longer over each commit than the apply
interval, while an agent keeps sending. Every sample sent must be applied, and the
collector must say that the job overran, not drop runs with a warning each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from collector.ledger.observers import StoredBatch
from collector.ledger.records import LedgerWrite
from gpufleet.cli.collector import build_collector
from tests.collector.settings_file import load

T0 = 1_767_225_600.0
INFO = GpuInfo(uuid="GPU-a", index=0, name="NVIDIA H100 80GB HBM3")
APPLY_EVERY_SECONDS = 0.1
COMMIT_TAKES_SECONDS = 0.25  # a slow sink: each commit holds the apply job this long


class SlowSink:
    def __init__(self) -> None:
        self.commits = 0

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        pass

    def write_committed(self, write: LedgerWrite) -> None:
        self.commits += 1
        time.sleep(COMMIT_TAKES_SECONDS)


def batch(seq: int, first_second: int, seconds: int) -> bytes:
    samples = tuple(
        GpuSample(timestamp=T0 + t, gpu_uuid=INFO.uuid, sm_activity=0.5, dram_activity=0.5,
                  power_watts=100.0, energy_joules=100.0 * t)
        for t in range(first_second, first_second + seconds)
    )  # fmt: skip
    return msgspec.json.encode(
        Batch(schema_version=SCHEMA_VERSION, node="n", agent_boot_id="b", seq=seq,
              sent_at=T0 + first_second + seconds, gpus=(INFO,), samples=samples)
    )  # fmt: skip


def test_a_job_slower_than_its_interval_runs_back_to_back_and_is_never_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load(
        tmp_path,
        f"ingest:\n  apply_interval_seconds: {APPLY_EVERY_SECONDS}\n"
        "  commit_interval_seconds: 0.001\n",
    )
    clock = [T0]
    lock = threading.Lock()

    def now() -> float:
        with lock:
            return clock[0]

    collector = build_collector(settings, now, tokens=frozenset({"t"}))
    sink = SlowSink()
    collector.core.observers.attach(sink)
    caplog.set_level(logging.WARNING)
    sent = 0
    try:
        collector.start_jobs()
        for seq in range(1, 31):  # 3 s of an agent sending 10 s of samples every 0.1 s
            collector.core.service.submit(batch(seq, sent, 10), None, now()).result(10)
            sent += 10
            with lock:
                clock[0] = T0 + sent + 60  # past the reorder window: all of it is ready
            time.sleep(0.1)
        with lock:  # the node falls silent: its last readings wait one reorder window
            clock[0] += settings.ingest.reorder_window_seconds
        deadline = time.monotonic() + 10
        while collector.core.fleet.buffered_samples() and time.monotonic() < deadline:
            time.sleep(0.05)
        buffered = collector.core.fleet.buffered_samples()
        time.sleep(2 * COMMIT_TAKES_SECONDS)  # the job's next run commits the last of it
        energy = [u.energy_joules for _, u in collector.ledger.usage_totals_by_gpu()]
    finally:
        collector.stop()
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert skipped == []
    assert collector.scheduler.overruns()["apply"] > 0  # said, not hidden
    assert any("job apply took" in r.getMessage() for r in caplog.records)
    # every sample applied by the job itself (not by stop's flush): 0..299 s at 100 W
    assert buffered == 0
    assert energy == [pytest.approx(100.0 * (sent - 1))]
