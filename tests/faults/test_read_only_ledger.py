"""A ledger the collector cannot write: the start is refused naming the file and the fix, and
once the fix is made the next start works.

Issue 17, defect 11: a read-only ledger file was refused with "attempt to write a readonly
database" (no file, no fix), and after its mode was fixed the start still failed until the
stale ``-shm`` was removed by hand: SQLite had created the ``-wal`` and ``-shm`` with the
read-only file's mode. Tests run as root, which file modes do not stop, so the modes case
runs the real ``gpufleet collector`` as an unprivileged user (``setpriv``), and the mount
case uses a tmpfs remounted read-only, which stops root too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.collector_process import ROOT, CollectorProcess
from tests.e2e.fleet_rig import TOKEN, free_port
from tests.faults.volume import remount, tmpfs
from tests.faults.write_rig import FAST_CONFIG, WATTS, gpu_energy, node_batch, post, wait_for

NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def collector_on(folder: Path, db: Path, prefix: list[str] = []) -> CollectorProcess:  # noqa: B006
    config = folder / "collector.yaml"
    config.write_text(FAST_CONFIG)
    collector = CollectorProcess(config, free_port(), db, TOKEN, folder / "collector.log")
    collector.args = [*prefix, *collector.args]
    return collector


def refused_start(collector: CollectorProcess) -> str:
    """Run the start that must fail; its output."""
    result = subprocess.run(
        collector.args, cwd=ROOT, env=collector.env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def store_one_batch(collector: CollectorProcess, db: Path) -> None:
    collector.start()
    try:
        assert post(collector, node_batch("a", 1, time.time() - 120, range(0, 60, 10))).is_success
        wait_for("the batch committed", lambda: bool(gpu_energy(db)), within_seconds=30)
    finally:
        collector.terminate()


@pytest.fixture
def nobodys_folder() -> Iterator[Path]:
    """A folder an unprivileged user owns (pytest's tmp_path is root's alone)."""
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the collector as an unprivileged user")
    folder = Path(tempfile.mkdtemp(prefix="gpufleet-ro-"))
    os.chown(folder, NOBODY, NOBODY)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_read_only_ledger_file_is_named_and_starts_once_its_mode_is_fixed(
    nobodys_folder: Path,
) -> None:
    db = nobodys_folder / "ledger.db"
    collector = collector_on(nobodys_folder, db, AS_NOBODY)
    try:
        store_one_batch(collector, db)
        db.chmod(0o444)
        output = refused_start(collector)
        assert f"{db} is not writable" in output and "chmod u+w" in output, output
        db.chmod(0o644)  # the fix the message names, and nothing else
        collector.start()
        assert collector.health()["ready"] is True
    finally:
        collector.stop_if_running()
    assert gpu_energy(db) == {"GPU-a": WATTS * 50}


def test_a_ledger_on_a_read_only_mount_is_named_and_starts_once_remounted(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "vol", 64 * 1024 * 1024) as vol:
        db = vol / "ledger.db"
        collector = collector_on(tmp_path, db)
        try:
            store_one_batch(collector, db)
            remount(vol, "ro")
            output = refused_start(collector)
            assert f"directory {vol} is not writable" in output, output
            assert "mount its volume read-write" in output
            remount(vol, "rw")
            collector.start()
            assert collector.health()["ready"] is True
        finally:
            collector.stop_if_running()
        assert gpu_energy(db) == {"GPU-a": WATTS * 50}
