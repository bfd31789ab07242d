"""``gpufleet demo --influx-*`` as a user runs it, writing to a real server on loopback."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collector.influx.influx_server import VictoriaMetrics
from tests.e2e.test_demo_command import free_port_block
from tests.paths import REPO

pytestmark = pytest.mark.slow
ROOT = REPO


@pytest.fixture
def victoria(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    server = VictoriaMetrics(tmp_path / "vm")
    server.start()
    yield server
    server.stop()


def test_demo_writes_its_fleet_to_influxdb(victoria: VictoriaMetrics) -> None:
    port = free_port_block(2)
    command = [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "demo", "--plain",
               "--duration", "2", "--history", "0.5", "--nodes", "1", "--gpus-per-node", "2",
               "--port", str(port), "--influx-url", victoria.url, "--influx-org", "gpufleet",
               "--influx-bucket", "fleet"]  # fmt: skip
    env = {**os.environ, "GPUFLEET_INFLUX__TOKEN": "demo-token"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "demo-token" not in done.stdout + done.stderr

    power = victoria.export("gpu_power_watts")
    assert len(power) == 2  # one series per GPU (one holder each over the run)
    # half an hour of history at the default 10 s step, then the live part: none missing
    for series in power:
        steps = sorted(set(series.timestamps_ms))
        assert len(steps) >= 180, series.labels
        gaps = [b - a for a, b in itertools.pairwise(steps)]
        assert gaps[:179] == [10_000] * 179, series.labels
        assert {"node", "uuid", "model"} <= series.labels.keys()
    energy = victoria.export("workload_hour_energy_joules")
    assert energy and all(v >= 0 for s in energy for v in s.values)
    assert any(v > 0 for s in energy for v in s.values)
