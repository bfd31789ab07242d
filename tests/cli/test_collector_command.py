"""`gpufleet collector` refuses, with one line naming the problem, a ledger whose intake log
another collector process holds (two collectors on one ledger would each count the other's
batches as never seen)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from collector.ledger.batch_log import BatchLog


def test_a_second_collector_on_one_ledger_stops_with_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    held = BatchLog(Path(f"{db}-intake"), sync=False)  # the first collector's lock
    with socket.socket() as probe:  # a free port, should it get as far as serving
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gpufleet", "collector", "--port", port, "--db", str(db)],
            capture_output=True, text=True, timeout=60,
            env={"GPUFLEET_SERVER__TOKENS": "t", "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
    finally:
        held.close()
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"gpufleet collector: ledger: intake log {db}-intake is in use by another collector "
        "process: one collector per ledger"
    )
    assert "Traceback" not in done.stderr
