"""Measuring tools the benchmarks share: child processes, ports, CPU and memory, tables.

CPU and memory of another process come from Linux's /proc (``utime + stime`` in
/proc/PID/stat, ``VmRSS``/``VmHWM`` in /proc/PID/status), so a server running in a
subprocess is measured, or left out of a figure, exactly.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence

MIB = 1024 * 1024
#: the agent token the benchmarks' collectors accept, and the headers of a gzipped batch POST
TOKEN = "bench-token"
BATCH_HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Encoding": "gzip",
                 "Content-Type": "application/json"}  # fmt: skip
_CLOCK_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_http(url: str, timeout_seconds: float = 20.0) -> None:
    """Poll ``url`` until it answers 200; raises TimeoutError naming the URL."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(url, timeout=2) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout_seconds} s")


def http_get(url: str, timeout_seconds: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
        return str(response.read().decode())


@contextlib.contextmanager
def child_process(
    args: Sequence[str], env: dict[str, str] | None = None, quiet: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``args`` for the duration of the block; terminate (then kill) this one process.

    Its stdout is discarded; its stderr is ours (so a failing server explains itself)
    unless ``quiet``.
    """
    stderr = subprocess.DEVNULL if quiet else None
    process = subprocess.Popen(list(args), env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def python_module(module: str, *args: str) -> list[str]:
    """The command line that runs ``python -m module args`` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def cpu_seconds_of(pid: int) -> float:
    """User + system CPU seconds a process has used (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # the command name (field 2) may hold spaces; the fields after its ")" are fixed
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / _CLOCK_TICKS_PER_SECOND


def memory_bytes_of(pid: int | str = "self") -> tuple[int, int]:
    """(resident, peak resident) bytes of a process, from VmRSS and VmHWM."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
    return values["VmRSS"], values["VmHWM"]


def print_table(rows: Sequence[Mapping[str, object]]) -> None:
    """A plain text table: the first row's keys are the header; columns left-aligned."""
    if not rows:
        return
    header = list(rows[0])
    cells = [header] + [[_cell(row[name]) for name in header] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if n == 0:
            print("  ".join("-" * width for width in widths))


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
