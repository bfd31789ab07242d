"""``kill -9`` the collector mid-stream, restart it on the same ledger: totals equal the truth.

The collector is the real ``gpufleet collector`` command in a subprocess (its clock is the
wall clock, its token comes from the environment, it applies on its 1 s scheduler). The
agents run here: a simulated fleet whose epoch is two hours ago is sampled every 10 s of
simulated time and shipped as fast as it goes, so the samples' timestamps are near now.
The collector is killed twice: once right after a batch was acknowledged (acknowledged
batches wait in the ledger, unapplied), once between two nodes' sends; while it is down
the agents keep sampling and their spools keep everything.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from agent.sources.simulated.source import ActivityKind, SimulatedFleet, build_fleet
from collector.ledger.store import Ledger
from gpufleet.cli.collector import build_collector, settings_from_args
from gpufleet.cli.demo_fleet import SimClock
from tests.e2e.collector_process import CollectorProcess
from tests.e2e.fleet_rig import TOKEN, Agent, build_agent, free_port

pytestmark = pytest.mark.slow

STEP_SECONDS = 10.0
HISTORY_SECONDS = 2 * 3600.0
SHIP_EVERY_TICKS = 6
TICKS = int(HISTORY_SECONDS / STEP_SECONDS)
KILL_AFTER_ACK_AT, RESTART_1_AT = 240, 300  # down for 10 simulated minutes
KILL_BETWEEN_NODES_AT, RESTART_2_AT = 480, 540


def flush(agents: list[Agent]) -> None:
    for agent in agents:
        agent.shipper.flush()


def drain(agents: list[Agent], timeout_seconds: float = 60.0) -> None:
    """Send until every spool is empty (the collector is up)."""
    deadline = time.monotonic() + timeout_seconds
    while any(a.stats.snapshot().spool_batches for a in agents):
        assert time.monotonic() < deadline, "spools did not drain"
        flush(agents)


def stream(fleet: SimulatedFleet, clock: SimClock, agents: list[Agent], collector: CollectorProcess,
           db: Path) -> None:  # fmt: skip
    start = clock()
    for tick in range(TICKS + 1):
        clock.set(start + tick * STEP_SECONDS)
        for agent in agents:
            agent.sampler.tick()
        if tick == KILL_BETWEEN_NODES_AT:
            flush(agents[:2])
            collector.kill()
            flush(agents[2:])  # refused: stays spooled
        elif tick % SHIP_EVERY_TICKS == 0:
            flush(agents)
        if tick == KILL_AFTER_ACK_AT:
            collector.kill()
            with Ledger.open(str(db)) as ledger:  # acknowledged, not yet applied
                assert ledger.pending_batches()
        if tick in (RESTART_1_AT, RESTART_2_AT):
            collector.start()


def test_kill_9_mid_stream_and_restart_loses_nothing_and_counts_nothing_twice(
    tmp_path: Path,
) -> None:
    start = time.time() - HISTORY_SECONDS
    fleet = build_fleet(start_time=start)
    clock = SimClock(start)
    config = tmp_path / "collector.yaml"
    config.write_text(f"analysis:\n  stale_after_seconds: {3 * STEP_SECONDS}\n")
    db = tmp_path / "ledger.db"
    collector = CollectorProcess(config, free_port(), db, TOKEN, tmp_path / "collector.log")
    agents = [build_agent(node, collector.url, clock, STEP_SECONDS, tmp_path / node.name)
              for node in fleet.nodes]  # fmt: skip
    try:
        collector.start()
        stream(fleet, clock, agents, collector, db)
        drain(agents)
        collector.terminate()  # whether SIGTERM applies the rest: see the test below
    finally:
        collector.stop_if_running()
        for agent in agents:
            agent.shipper.close()
    assert all(a.stats.snapshot().spool_dropped_batches_total == 0 for a in agents)
    apply_the_rest(config, db)
    check_against_truth(fleet, db, start, clock())


def apply_the_rest(config: Path, db: Path) -> None:
    """One more start on the same ledger and a clean stop (the command's own path minus
    HTTP): what was acknowledged is replayed, and stopping applies the reorder window."""
    settings = settings_from_args(argparse.Namespace(config=config, host=None, port=None,
                                                     db=str(db)))  # fmt: skip
    build_collector(settings, tokens=frozenset([TOKEN])).stop()


def check_against_truth(fleet: SimulatedFleet, db: Path, start: float, end: float) -> None:
    with Ledger.open(str(db)) as ledger:
        assert not ledger.pending_batches()
        per_gpu = {g.uuid: u for g, u in ledger.usage_totals_by_gpu()}
        per_workload = {ref.key: u for ref, u in ledger.usage_totals_by_workload()}
        episodes = ledger.idle_episodes(start, end, include_open=True)
    assert set(per_gpu) == set(fleet.gpu_uuids)
    truth = {u: fleet.true_energy_joules(u, start, end) for u in fleet.gpu_uuids}
    for uuid, usage in per_gpu.items():
        assert usage.energy_joules == pytest.approx(truth[uuid], rel=0.005), uuid
    total = sum(u.energy_joules for u in per_gpu.values())
    assert total <= sum(truth.values()) * 1.005  # nothing counted twice
    assert set(per_workload) == {job.workload.key for job in fleet.jobs}
    for key, usage in per_workload.items():
        want = fleet.true_workload_energy_joules(key, start, end)
        assert usage.energy_joules == pytest.approx(want, rel=0.005), key
    for uuid in fleet.gpus_held_by(ActivityKind.STUCK, start):  # idle from first to last sample
        assert per_gpu[uuid].idle_seconds == pytest.approx(end - start, abs=1e-6)
        mine = [(e.start, e.end) for e in episodes if e.gpu_uuid == uuid]
        assert mine == [(start, None)]


def test_sigterm_applies_everything_acknowledged_and_exits_0(tmp_path: Path) -> None:
    start = time.time() - 600.0
    fleet = build_fleet(nodes=1, gpus_per_node=2, start_time=start)
    clock = SimClock(start)
    config = tmp_path / "collector.yaml"
    config.write_text("")
    db = tmp_path / "ledger.db"
    collector = CollectorProcess(config, free_port(), db, TOKEN, tmp_path / "collector.log")
    agent = build_agent(fleet.nodes[0], collector.url, clock, STEP_SECONDS, tmp_path / "spool")
    try:
        collector.start()
        for tick in range(7):  # one simulated minute: all of it inside the reorder window
            clock.set(start + tick * STEP_SECONDS)
            agent.sampler.tick()
        assert agent.shipper.flush() == 1
        code = collector.terminate()
    finally:
        collector.stop_if_running()
        agent.shipper.close()
    with Ledger.open(str(db)) as ledger:
        assert not ledger.pending_batches()
        applied = {c.gpu_uuid: c.applied_until for c in ledger.cursors().values()}
    assert applied == dict.fromkeys(fleet.gpu_uuids, clock())
    assert code == 0
