"""``kill -9`` under load: agents post from their own threads while the collector process
is killed and restarted three times; nothing is lost and nothing counted twice.

tests/e2e/test_restart.py kills it twice between one thread's sends; here each node's
agent samples and ships on its own thread, as fast as it can, so kills land mid-request:
a batch made durable whose answer never left, a request half read, a group commit
half way. The agents keep what was not acknowledged and resend it; the collector
answers what it already holds as a duplicate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.sources.simulated.source import build_fleet
from tests.e2e.collector_process import CollectorProcess
from tests.faults.conftest import Report
from tests.faults.rig import STEP_SECONDS, SimAgent, drain, sim_agent, write_config
from tests.faults.tally import agents_tally

pytestmark = pytest.mark.slow  # real collector processes, kill -9, mounts

NODES, GPUS_PER_NODE = 4, 2
TICKS = 240  # 40 simulated minutes per node
SHIP_EVERY_TICKS = 2
KILLS = 3
#: wall seconds between two ticks of an agent, so the kills fall while they all post
TICK_PAUSE_SECONDS = 0.02


def stream(agent: SimAgent, progress: list[int], index: int) -> None:
    for tick in range(TICKS):
        agent.clock.set(agent.clock() + STEP_SECONDS)
        agent.tick()
        if tick % SHIP_EVERY_TICKS == 0:
            agent.shipper.flush()
        progress[index] = tick + 1
        time.sleep(TICK_PAUSE_SECONDS)


def test_three_kills_under_concurrent_load_lose_nothing_and_count_nothing_twice(
    tmp_path: Path, collector_at: Callable[[Path, Path], CollectorProcess], fault_report: Report
) -> None:
    start = time.time() - 2 * 3600.0
    fleet = build_fleet(nodes=NODES, gpus_per_node=GPUS_PER_NODE, start_time=start)
    config, db = write_config(tmp_path / "collector.yaml"), tmp_path / "ledger.db"
    collector = collector_at(config, db)
    agents = [sim_agent(n, collector.url, tmp_path / n.name, start) for n in fleet.nodes]
    for agent in agents:
        agent.tick()
    progress = [0] * len(agents)
    threads = [
        threading.Thread(target=stream, args=(a, progress, i), daemon=True)
        for i, a in enumerate(agents)
    ]
    collector.start()
    try:
        for thread in threads:
            thread.start()
        for kill in range(1, KILLS + 1):
            while min(progress) < TICKS * kill // (KILLS + 1):
                time.sleep(0.01)
            collector.kill()
            time.sleep(0.2)  # down while the agents go on
            collector.start()
        for thread in threads:
            thread.join(timeout=120)
        drain(agents)
        collector.terminate()
    finally:
        for agent in agents:
            agent.shipper.close()
    tally, sender = agents_tally(config, db, fleet, agents)

    failed = sum(1 for a in agents for e in a.wire.exchanges if e.status is None)
    fault_report(
        lost=tally.lost_intervals + sender.never_accepted,
        double=len(tally.double_counted_gpus) + sender.accepted_twice,
        kills=KILLS,
        posts_without_answer=failed,
        samples=sender.produced,
    )
    assert failed > 0  # the kills did land while agents were posting
    assert sender.never_accepted == 0 and sender.accepted_twice == 0
    assert tally.lost_intervals == 0 and not tally.double_counted_gpus
    assert max(tally.energy_errors().values()) <= 0.005
    assert tally.pending_batches == 0
    assert all(a.stats.snapshot().spool_dropped_batches_total == 0 for a in agents)
