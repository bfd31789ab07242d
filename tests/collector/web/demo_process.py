"""``gpufleet demo`` in a subprocess with simulated time all but frozen (``--speed 0.001``),
so a page and the API answer for the same moment; and a headless Chromium to look at it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.paths import REPO

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]  # fmt: skip
ROOT = REPO


@dataclass(frozen=True)
class RunningDemo:
    url: str
    token: str
    console_url: str


def _ctrl_c_on() -> None:
    """A shell starts background jobs with SIGINT ignored; the demo stops cleanly on it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def running_demo(
    port: int, history_hours: float = 2.0, speed: float = 0.001, options: Sequence[str] = ()
) -> Iterator[RunningDemo]:
    """Start the demo (``options``: more of its command line, e.g. ``--nodes``), wait for
    its console line, stop it with Ctrl-C (SIGINT) after."""
    command = [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "demo", "--plain",
               "--history", str(history_hours), "--speed", str(speed), "--duration", "900",
               "--port", str(port), *options]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=_ctrl_c_on)  # fmt: skip
    try:
        yield _wait_for_console(proc)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _wait_for_console(proc: subprocess.Popen[str]) -> RunningDemo:
    deadline = time.monotonic() + 120
    seen: list[str] = []
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        match = re.match(r"console\s+(http://\S+)/ui/#token=(\S+)", line)
        if match:
            url, token = match.groups()
            return RunningDemo(url, token, f"{url}/ui/#token={token}")
    raise AssertionError("the demo printed no console URL:\n" + "".join(seen[-30:]))
