"""One collector with ``cluster.enabled: false`` per PostgreSQL ledger (issue 18): a
second ``gpufleet collector`` on the same ledger, single or replica, refuses to start and
names the first's host and pid; after the first is ``kill -9``-ed a new one starts at
once (the server released the dead session's lock)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.e2e.collector_process import CollectorProcess
from tests.e2e.fleet_rig import TOKEN, free_port
from tests.postgres import PostgresServer

pytestmark = pytest.mark.slow

SINGLE = "cluster:\n  enabled: false\n"
REPLICA = "cluster:\n  enabled: true\n  lease_seconds: 3\n  renew_seconds: 1\n"


def refused(config: Path, url: str, log: Path) -> str:
    """Start a collector expected to refuse; its output."""
    second = CollectorProcess(config, free_port(), url, TOKEN, log)
    proc = subprocess.run(second.args, env=second.env, capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    return proc.stderr.decode()


def test_a_second_unclustered_collector_refuses_until_the_first_dies(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.new_database()
    single, replica = tmp_path / "single.yaml", tmp_path / "replica.yaml"
    single.write_text(SINGLE)
    replica.write_text(REPLICA)
    first = CollectorProcess(single, free_port(), url, TOKEN, tmp_path / "first.log")
    after = CollectorProcess(single, free_port(), url, TOKEN, tmp_path / "after.log")
    try:
        first.start()
        assert first.proc is not None
        holder = f"({socket.gethostname()[:40]}, pid {first.proc.pid})"
        message = refused(single, url, tmp_path / "second.log")
        assert f"another collector {holder} applies ledger" in message
        assert "set cluster.enabled: true to run replicas" in message
        message = refused(replica, url, tmp_path / "replica.log")
        assert f"a collector with cluster.enabled: false {holder}" in message
        first.kill()
        after.start()  # no wait for the dead one: its session, and lock, are gone
        assert after.proc is not None and after.proc.poll() is None
    finally:
        first.stop_if_running()
        after.stop_if_running()


def test_replicas_share_the_ledger_and_keep_a_single_collector_out(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.new_database()
    single, replica = tmp_path / "single.yaml", tmp_path / "replica.yaml"
    single.write_text(SINGLE)
    replica.write_text(REPLICA)
    replicas = [
        CollectorProcess(replica, free_port(), url, TOKEN, tmp_path / f"replica-{i}.log")
        for i in range(2)
    ]
    try:
        for r in replicas:
            r.start()
        message = refused(single, url, tmp_path / "single.log")
        for r in replicas:
            assert r.proc is not None and f"pid {r.proc.pid}" in message
    finally:
        for r in replicas:
            r.stop_if_running()
