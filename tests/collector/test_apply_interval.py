"""``ingest.apply_interval_seconds``: the collector's apply job runs that often, and really
applies ready samples to the ledger on its own (its own schedule, no test-driven tick)."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from gpufleet.cli.collector import CHECK_EVERY_SECONDS, build_collector
from gpufleet.settings import ConfigError
from tests.collector.settings_file import load

T0 = 1_767_225_600.0
INFO = GpuInfo(uuid="GPU-a", index=0, name="NVIDIA H100 80GB HBM3")


def test_the_default_applies_every_15_seconds_and_commits_every_60(tmp_path: Path) -> None:
    ingest = load(tmp_path, "").ingest
    assert (ingest.apply_interval_seconds, ingest.commit_interval_seconds) == (15.0, 60.0)


@pytest.mark.parametrize("key", ["apply_interval_seconds", "commit_interval_seconds"])
@pytest.mark.parametrize("bad", ["0", "-5", "301"])
def test_a_bad_interval_is_refused_naming_the_key(tmp_path: Path, key: str, bad: str) -> None:
    with pytest.raises(ConfigError, match=rf"ingest\.{key}: .*got {bad}"):
        load(tmp_path, "", {f"GPUFLEET_INGEST__{key.upper()}": bad})


def test_the_apply_job_runs_at_the_interval_and_applies_ready_samples(tmp_path: Path) -> None:
    settings = load(tmp_path, "ingest:\n  apply_interval_seconds: 0.2\n")
    clock = [T0 + 10]
    collector = build_collector(settings, lambda: clock[0], tokens=frozenset({"t"}))
    try:
        samples = tuple(
            GpuSample(
                timestamp=T0 + t,
                gpu_uuid=INFO.uuid,
                sm_activity=0.5,
                dram_activity=0.5,
                power_watts=100.0,
                energy_joules=100.0 * t,
            )
            for t in range(10)
        )
        batch = Batch(schema_version=SCHEMA_VERSION, node="n", agent_boot_id="b", seq=1,
                      sent_at=T0 + 10, gpus=(INFO,), samples=samples)  # fmt: skip
        collector.core.service.submit(msgspec.json.encode(batch), None, T0 + 10).result(10)
        collector.start_jobs()
        jobs = collector.scheduler.intervals()
        assert jobs["apply"] == 0.2 and jobs["evaluate"] == CHECK_EVERY_SECONDS
        clock[0] = T0 + 100  # the window (30 s) has passed on the collector's clock
        deadline = time.monotonic() + 20
        while collector.core.fleet.buffered_samples() and time.monotonic() < deadline:
            time.sleep(0.05)
        totals = collector.ledger.usage_totals_by_gpu()
        assert [u.energy_joules for _, u in totals] == [900.0]  # 0..9 s at 100 W, counter
    finally:
        collector.stop()
