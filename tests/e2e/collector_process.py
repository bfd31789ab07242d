"""``gpufleet collector`` as a real subprocess: start, wait until healthy, kill -9, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parents[2]


class CollectorProcess:
    """One collector command line; ``start`` may be called again after a kill."""

    def __init__(self, config: Path, port: int, db: Path | str, token: str, log: Path) -> None:
        """``db``: the ledger, a SQLite file or a ``postgresql://`` URL."""
        self.url = f"http://127.0.0.1:{port}"
        self.args = [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "collector",
                     "--config", str(config), "--port", str(port), "--ledger", str(db)]  # fmt: skip
        self.env = {**os.environ, "GPUFLEET_SERVER__TOKENS": token}
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    def start(self, timeout_seconds: float = 30.0) -> None:
        self._log_file = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=self._log_file, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"collector exited {self.proc.returncode}: {self.output()}")
            if self._healthy():
                return
            time.sleep(0.05)
        raise AssertionError(f"collector not healthy after {timeout_seconds} s: {self.output()}")

    def _healthy(self) -> bool:
        try:
            return httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def health(self) -> dict[str, object]:
        response = httpx.get(self.url + "/healthz", timeout=5.0)
        body: dict[str, object] = response.raise_for_status().json()
        return body

    def kill(self) -> None:
        """``kill -9``: no flush, no clean shutdown."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._close_log()

    def terminate(self, timeout_seconds: float = 30.0) -> int:
        """SIGTERM, the way an orchestrator stops it; returns the exit code."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGTERM)
        code = self.proc.wait(timeout=timeout_seconds)
        self._close_log()
        return code

    def stop_if_running(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
