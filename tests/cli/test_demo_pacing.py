"""``gpufleet demo`` on a machine that cannot keep up: the fleet view stays true.

Simulated time runs ``--speed`` times faster than wall time, so a wall-time stall anywhere
between an agent's read and the collector's buffer (a starved CPU, a long GC pause, a slow
ledger) ages every sample ``--speed`` times as fast. Here the collector's ingest thread is
held for a few seconds once, through the ledger-observer hook as a slow sink would hold
it, and the live fleet is read throughout: every GPU must keep the state the simulator
says it had when its newest sample was taken, never turn "unknown" because the demo's own
clock ran ahead of its own agents.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent.sources.simulated.source import SimulatedFleet
from collector.ledger.observers import StoredBatch
from collector.ledger.records import LedgerWrite
from collector.records import GpuState, GpuView
from gpufleet.cli import demo as demo_command
from gpufleet.cli import demo_nodes
from tests.ports import free_port_block

pytestmark = pytest.mark.slow

NODES = 2
STALL_SECONDS = 3.0  # two stale thresholds of wall time at --speed 60


class IngestStall:
    """A ledger observer that holds the ingest thread once, after ``after`` groups."""

    def __init__(self, seconds: float, after: int) -> None:
        self.seconds = seconds
        self.after = after
        self.groups = 0
        self.stalled = threading.Event()

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        self.groups += 1
        if self.groups == self.after:
            self.stalled.set()
            time.sleep(self.seconds)

    def write_committed(self, write: LedgerWrite) -> None:
        pass


def demo_args(port: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo_command.add_parser(parser.add_subparsers())
    flags = ["demo", "--nodes", str(NODES), "--history", "0.05", "--port", str(port), "--plain"]
    return parser.parse_args(flags)


def true_state(fleet: SimulatedFleet, view: GpuView) -> GpuState:
    """What the simulator says the GPU was doing when its newest sample was taken."""
    assert view.last_seen is not None
    sm, dram = fleet.true_activity(view.uuid, view.last_seen)
    if max(sm, dram) >= 0.01:
        return GpuState.ACTIVE
    held = fleet.holder(view.uuid, view.last_seen) is not None
    return GpuState.ALLOCATED_IDLE if held else GpuState.UNALLOCATED


def test_a_stalled_ingest_slows_simulated_time_instead_of_turning_the_fleet_unknown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    args = demo_args(free_port_block(1 + NODES))
    demo = demo_command.build_demo(args, tmp_path)
    stall = IngestStall(STALL_SECONDS, after=20)  # the pre-run's groups, then some live ones
    demo.collector.core.observers.attach(stall)
    caplog.set_level(logging.WARNING)
    live = demo_command.start(demo, args)
    wrong: list[str] = []
    try:
        assert stall.stalled.wait(30), "the ingest thread was never held"
        deadline = time.monotonic() + 2 * STALL_SECONDS
        reads = 0
        while time.monotonic() < deadline:
            now = demo.clock()
            for view in demo.collector.core.service.fleet(now):
                expected = true_state(demo.fleet, view) if view.last_seen else None
                if view.state is not expected:
                    age = (
                        "never seen" if view.last_seen is None else f"{now - view.last_seen:.0f} s"
                    )
                    wrong.append(f"{view.uuid} {view.state.value} != {expected} ({age})")
            reads += 1
            time.sleep(0.1)
        demo_command.finish(demo, live)
    finally:
        demo_command.close(demo, live)
    assert reads > 20
    assert wrong == [], f"{len(wrong)} wrong views, first: {wrong[:5]}"
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert skipped == []


@pytest.mark.parametrize("skew_seconds", [-120.0, 400.0])
def test_a_skewed_node_in_the_demo_is_measured_and_judged_on_its_own_clock(
    tmp_path: Path, skew_seconds: float
) -> None:
    """``--skew``: a node whose agent's clock is off the collector's. The collector measures
    the offset, places the node's samples on its own timeline (every view of it matches
    the simulator at the true time, none "unknown"), and refuses none of its batches."""
    args = demo_args(free_port_block(2 + NODES))
    args.skew = skew_seconds
    demo = demo_command.build_demo(args, tmp_path)
    live = demo_command.start(demo, args)
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            time.sleep(0.2)
        now = demo.clock()
        views = [
            v for v in demo.collector.core.service.fleet(now) if v.node == demo_nodes.SKEWED_NODE
        ]
        offset = demo.collector.core.fleet.clocks.offset(demo_nodes.SKEWED_NODE)
        refused = demo.collector.core.service.stats.snapshot()
        demo_command.finish(demo, live)
    finally:
        demo_command.close(demo, live)
    assert len(views) == 8
    assert offset == pytest.approx(skew_seconds, abs=2.0)
    # the view's times are on the collector's clock: the simulator's truth at that time
    wrong = [v.uuid for v in views if v.state is not true_state(demo.fleet, v)]
    assert wrong == []
    assert all(v.state is not GpuState.UNKNOWN for v in views)
    assert sum(refused.batches_rejected.values()) == 0, refused.batches_rejected
    assert refused.late_samples == 0


def test_a_node_cut_off_in_the_demo_drains_its_spool_and_loses_nothing(tmp_path: Path) -> None:
    """``--outage``: a node whose network to the collector is down for 2 simulated
    minutes. Simulated time goes on without waiting for it; its spool keeps what it takes
    and drains once the network is back, and the collector applies the backlog in order:
    every second of the node's GPUs is accounted, energy and cost true to the simulator."""
    args = demo_args(free_port_block(2 + NODES))
    args.outage = 2.0
    demo = demo_command.build_demo(args, tmp_path)
    live = demo_command.start(demo, args)
    try:
        (agent,) = [a for a in demo.agents if a.node == demo_nodes.OUTAGE_NODE]
        assert agent.outage is not None
        deadline = time.monotonic() + 30
        while demo.clock() < agent.outage.end + 120 and time.monotonic() < deadline:
            time.sleep(0.2)
        demo_command.finish(demo, live)
        counters = demo.collector.core.service.stats.snapshot()
        fleet, ledger = demo.fleet, demo.collector.ledger
        start, end = fleet.nodes[0].epoch, demo.clock()
        usage = {g.uuid: u for g, u in ledger.usage_by_gpu(start - 3600, end + 3600)}
        node = next(n for n in fleet.nodes if n.name == demo_nodes.OUTAGE_NODE)
        failed = agent.stats.snapshot().batches_failed_total
    finally:
        demo_command.close(demo, live)
    assert demo.clock() >= agent.outage.end + 120, "simulated time waited for the outage"
    assert failed > 0  # the outage happened: sends failed and were kept
    assert sum(counters.batches_rejected.values()) == 0 and counters.late_samples == 0
    for info in node.discover():
        u = usage[info.uuid]
        truth = fleet.true_energy_joules(info.uuid, start, end)
        assert abs(u.energy_joules - truth) <= 0.005 * truth, info.uuid
        assert u.unknown_seconds == 0.0, info.uuid  # the outage's seconds came back


def test_simulated_time_never_runs_ahead_of_wall_time_times_the_speed(tmp_path: Path) -> None:
    """The pre-run ends at the wall clock's now; live steps follow at ``--speed``. The first
    step is a wall step later, not at once: taken at once, its sample was ``--step``
    simulated seconds ahead of its time (at ``--speed 0.001`` the console's tests saw a
    newest minute that grew under them: a sample 10 s in the future, arriving a second
    after the console line)."""
    args = demo_args(free_port_block(1 + NODES))
    args.step, args.speed = 1.0, 0.5  # a 2 s wall step
    demo = demo_command.build_demo(args, tmp_path)
    live = demo_command.start(demo, args)
    # the pre-run ended at the wall time it began at, at most now: simulated time at wall
    # time w is then at most now + (w - now) * speed (speed < 1)
    origin = time.time()
    try:
        ahead: list[float] = []
        first = demo.clock()
        while time.time() < origin + 3.0:
            allowed = origin + (time.time() - origin) * args.speed
            ahead.append(demo.clock() - allowed)
            time.sleep(0.02)
        stepped = demo.clock() > first
        demo_command.finish(demo, live)
    finally:
        demo_command.close(demo, live)
    assert max(ahead) <= 0.25  # half a wall second
    assert stepped
