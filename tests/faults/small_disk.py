"""The small-disk scenarios' rig: two simulated nodes and a collector whose ledger lives on
a 16 MiB tmpfs, for the full-disk and read-only tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.sources.simulated.source import SimulatedFleet, build_fleet
from tests.e2e.collector_process import CollectorProcess
from tests.faults.mounts import Tmpfs
from tests.faults.rig import SimAgent, sim_agent, write_config

DISK_BYTES = 16 * 1024 * 1024
#: segments grow with their appends (see test_disk_full.py), so 16 MiB hold several
SMALL_DISK = {"ledger": {"synchronous": "NORMAL"}}


@dataclass
class SmallDisk:
    disk: Tmpfs
    config: Path
    db: Path
    fleet: SimulatedFleet
    collector: CollectorProcess
    agents: list[SimAgent]


def small_disk(
    tmp_path: Path,
    tmpfs: Callable[[int], Tmpfs],
    collector_at: Callable[[Path, Path], CollectorProcess],
) -> SmallDisk:
    """Two nodes of two GPUs an hour into their history, each with its agent, and a
    collector (not started) whose ledger is on a fresh ``DISK_BYTES`` tmpfs."""
    disk = tmpfs(DISK_BYTES)
    start = time.time() - 3600.0
    fleet = build_fleet(nodes=2, gpus_per_node=2, start_time=start)
    config, db = write_config(tmp_path / "collector.yaml", SMALL_DISK), disk.path / "ledger.db"
    collector = collector_at(config, db)
    agents = [sim_agent(n, collector.url, tmp_path / n.name, start) for n in fleet.nodes]
    return SmallDisk(disk, config, db, fleet, collector, agents)
