"""Node clocks that jump (issue 17, defect 8): never discarded behind a silent 200.

Three nodes: one whose clock steps 280 s ahead for one sample and comes back, one whose
clock steps back an hour and stays there, and one whose clock is right. Whatever the
collector cannot place on a GPU's timeline it may drop (another issue fixes the timeline),
but never silently: each ack accounts for every sample of its batch (taken, or late with
a warning saying so), the late counter on ``/metrics`` counts what was dropped, and the
ledger, held to the simulator's truth, lost no more samples than were counted, and no
fewer: between the ledger's missing sampling steps less one per GPU (a run of lost
samples inside the history misses one step more than it has samples) and all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.sources.simulated.source import build_fleet
from tests.e2e.collector_process import CollectorProcess
from tests.faults.conftest import Report
from tests.faults.rig import (
    STEP_SECONDS,
    SimAgent,
    drain,
    metric_total,
    sim_agent,
    spans_of,
    write_config,
)
from tests.faults.tally import ledger_tally, settle
from tests.faults.wire import Exchange

pytestmark = pytest.mark.slow  # real collector processes, kill -9, mounts

TICKS, JUMP_AT = 90, 30
SHIP_EVERY_TICKS = 3
#: the collector applies this often; each send waits for one, so what a jump puts behind
#: applied time is late, as when a node ships every few seconds in real time
APPLY_SECONDS = 0.2
AHEAD_SECONDS, BACK_SECONDS = 280.0, -3600.0
LATE_SAMPLES = "gpufleet_collector_late_samples_total"


def run(agents: dict[str, SimAgent]) -> None:
    ahead, back = agents["ahead"], agents["back"]
    for tick in range(1, TICKS + 1):
        for agent in agents.values():
            agent.clock.set(agent.clock() + STEP_SECONDS)
        ahead.skew(AHEAD_SECONDS if tick == JUMP_AT else 0.0)
        back.skew(BACK_SECONDS if tick >= JUMP_AT else 0.0)
        for agent in agents.values():
            agent.tick()
            if tick % SHIP_EVERY_TICKS == 0:
                agent.shipper.flush()
        if tick % SHIP_EVERY_TICKS == 0:
            time.sleep(1.5 * APPLY_SECONDS)


def untold(exchanges: list[Exchange]) -> list[Exchange]:
    """Acks that do not account for every sample of their batch, or report late samples
    without a warning."""
    bad = []
    for e in exchanges:
        if e.ack_status != "accepted" or e.ack is None:
            continue
        late = int(e.ack.get("samples_late", 0))
        taken = int(e.ack.get("samples_accepted", 0))
        if taken + late != len(e.samples) or (late and not e.ack.get("warnings")):
            bad.append(e)
    return bad


def test_clock_jumps_are_never_discarded_silently(
    tmp_path: Path, collector_at: Callable[[Path, Path], CollectorProcess], fault_report: Report
) -> None:
    start = time.time() - 3 * 3600.0
    fleet = build_fleet(nodes=3, gpus_per_node=2, start_time=start)
    config, db = (
        write_config(
            tmp_path / "collector.yaml", {"ingest": {"apply_interval_seconds": APPLY_SECONDS}}
        ),
        tmp_path / "ledger.db",
    )
    collector = collector_at(config, db)
    nodes = dict(zip(("ahead", "back", "right"), fleet.nodes, strict=True))
    agents = {k: sim_agent(n, collector.url, tmp_path / n.name, start) for k, n in nodes.items()}
    for agent in agents.values():
        agent.tick()
    collector.start()
    try:
        run(agents)
        drain(agents.values())
        time.sleep(3.0)  # a few apply intervals: what is late at apply is counted by now
        late_counted = metric_total(collector.url, LATE_SAMPLES)
        collector.terminate()
    finally:
        for agent in agents.values():
            agent.shipper.close()
    settle(config, db)

    # true times: a sample stamped an hour early is one the ledger should have in its place
    tally = ledger_tally(db, fleet, spans_of(agents.values()), STEP_SECONDS)
    exchanges = [e for a in agents.values() for e in a.wire.exchanges]
    told_late = sum(int((e.ack or {}).get("samples_late", 0)) for e in exchanges)
    most = tally.lost_intervals
    least = sum(max(0, tally.missing_intervals(u) - 1) for u in tally.gpus)
    right = {u for u, _ in agents["right"].produced}
    fault_report(
        lost=least if least == most else f"{least}..{most}",
        double=len(tally.double_counted_gpus),
        late_counted=int(late_counted),
        late_told_in_acks=told_late,
    )
    assert not untold(exchanges), untold(exchanges)[:3]
    assert told_late > 0  # the back-stepped node's samples are refused as late, and told
    assert least <= late_counted <= most
    assert all(tally.missing_intervals(u) == 0 for u in right)
    assert not tally.double_counted_gpus
