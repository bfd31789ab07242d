"""A real victoria-metrics on loopback for the InfluxDB sink tests (Debian package
``victoria-metrics``): it accepts InfluxDB's ``/api/v2/write`` and gives exact values back
through ``/api/v1/export``. Series are named ``<measurement>_<field>``, tags become labels.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

BINARY = "victoria-metrics"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    values: list[float]
    timestamps_ms: list[int]


class VictoriaMetrics:
    """One server process; ``stop`` and ``start`` again keep its data (same directory)."""

    def __init__(self, data_dir: Path) -> None:
        if shutil.which(BINARY) is None:
            pytest.fail(f"{BINARY} not installed (scripts/debian-packages.txt lists it)")
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [
                BINARY,
                f"-httpListenAddr=127.0.0.1:{self.port}",
                f"-storageDataPath={self.data_dir}",
                "-retentionPeriod=100y",  # the tests write hours-old timestamps
                "-search.disableCache",
                "-loggerLevel=ERROR",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self._proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"{BINARY} did not start on {self.url}")

    def stop(self) -> None:
        """SIGTERM: the server flushes what it acknowledged, then exits."""
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=20)
            self._proc = None

    def export(self, match: str) -> list[Series]:
        """Every stored sample of the series matching ``match`` (a PromQL selector)."""
        httpx.get(f"{self.url}/internal/force_flush", timeout=10).raise_for_status()
        response = httpx.post(f"{self.url}/api/v1/export", data={"match[]": match}, timeout=10)
        response.raise_for_status()
        series = []
        for line in response.text.splitlines():
            row = json.loads(line)
            series.append(Series(row["metric"], row["values"], row["timestamps"]))
        return series

    def wait_for_samples(self, match: str, count: int, timeout_seconds: float = 10.0) -> int:
        """Poll until ``count`` distinct (series, timestamp) samples match; returns the count."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            found = sum(len(set(s.timestamps_ms)) for s in self.export(match))
            if found >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.1)
