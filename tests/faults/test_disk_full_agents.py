"""A full disk under the ledger and the intake log (issue 17, defects 2 and 11).

Both live on a 16 MiB tmpfs the test mounts; a filler file takes every byte left while
agents keep sampling and shipping. Refused batches stay in the agents' spools (which are
elsewhere, as on a node), ``/readyz`` must turn false within 30 s of the write path
failing, and true within 30 s of the filler going; then every sample the agents produced
is in the ledger exactly once.

``ledger.synchronous: NORMAL``: segments grow with their appends instead of being
zero-filled to 8 MiB when created (FULL), so the small tmpfs holds several and a full disk
stops the intake log at once rather than after 8 MiB of batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.collector_process import CollectorProcess
from tests.faults.conftest import Report
from tests.faults.mounts import Tmpfs
from tests.faults.rig import (
    SimAgent,
    drain,
    run_ticks,
    status_of,
)
from tests.faults.small_disk import small_disk
from tests.faults.tally import agents_tally

pytestmark = pytest.mark.slow  # real collector processes, kill -9, mounts

#: readiness must follow the write path within this (issue 17, "Must show")
READINESS_SECONDS = 30.0


def ship_until_ready_is(want: int, collector: CollectorProcess, agents: list[SimAgent]) -> float:
    """Sample and ship (one step a round) until ``/readyz`` answers ``want``; seconds taken."""
    began = time.monotonic()
    while True:
        run_ticks(agents, 1, ship_every=1)
        status = status_of(collector.url + "/readyz")
        assert status != 404, "the collector has no /readyz (issue 17, defect 2)"
        if status == want:
            return time.monotonic() - began
        assert time.monotonic() - began < READINESS_SECONDS, (
            f"/readyz still {status} after {READINESS_SECONDS} s, want {want}: "
            + collector.output()
        )
        time.sleep(0.2)


def test_a_full_disk_keeps_batches_with_the_agents_and_readiness_tells(
    tmp_path: Path,
    tmpfs: Callable[[int], Tmpfs],
    collector_at: Callable[[Path, Path], CollectorProcess],
    fault_report: Report,
) -> None:
    rig = small_disk(tmp_path, tmpfs, collector_at)
    disk, config, db, fleet = rig.disk, rig.config, rig.db, rig.fleet
    collector, agents = rig.collector, rig.agents
    collector.start()
    try:
        ship_until_ready_is(200, collector, agents)
        disk.fill()
        to_unready = ship_until_ready_is(503, collector, agents)
        run_ticks(agents, 5, ship_every=1)  # a little longer on a full disk
        kept = sum(a.spooled() for a in agents)
        disk.free()
        to_ready = ship_until_ready_is(200, collector, agents)
        drain(agents)
        collector.terminate()
    finally:
        for agent in agents:
            agent.shipper.close()
    tally, sender = agents_tally(config, db, fleet, agents)

    refused = sum(1 for a in agents for e in a.wire.exchanges if e.status == 503)
    fault_report(
        lost=tally.lost_intervals + sender.never_accepted,
        double=len(tally.double_counted_gpus) + sender.accepted_twice,
        batches_kept_by_agents=kept,
        answered_503=refused,
        unready_after_s=round(to_unready, 1),
        ready_again_after_s=round(to_ready, 1),
    )
    assert kept > 0 and refused > 0  # the full disk did refuse batches; the agents kept them
    assert sender.never_accepted == 0 and sender.accepted_twice == 0
    assert tally.lost_intervals == 0 and not tally.double_counted_gpus
    assert max(tally.energy_errors().values()) <= 0.005
    assert tally.pending_batches == 0
    assert all(a.stats.snapshot().spool_dropped_batches_total == 0 for a in agents)
