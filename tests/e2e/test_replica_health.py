"""A replica's health says what one collector's says of the same stream (issue 18): the
samples waiting for the reorder window, how far applying trails, each node's clock.

On a replica the front that accepts a batch buffers nothing: the batch goes to its shard's
owner through the intake. So the owner's fleets hold what health reports, and the owner
must measure each node's clock itself (the views, the staleness it judges, the idle runs
all correct by it). Before: a replica reported 0 samples pending and no lag whatever it
held, and judged a node 120 s behind on the collector's clock: its GPUs ``unknown``.

The same fleet, agents and skewed clocks, streamed by hand to one collector on SQLite and
to one replica on PostgreSQL; both stop mid-run, with samples inside the reorder window.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.fleet_rig import FleetRig, build_e2e_fleet
from tests.postgres import PostgresServer

pytestmark = pytest.mark.slow

STEP_SECONDS = 10.0
SHIP_EVERY_TICKS = 2  # a POST per node every 20 s: the reorder window (30 s) holds some
RUN_SECONDS = 20 * 60.0
CLOCK_OFFSETS = {"gpu-node-00": -120.0, "gpu-node-01": 400.0}


def streamed(workdir: Path, url: str | None) -> Iterator[FleetRig]:
    workdir.mkdir()
    with FleetRig(build_e2e_fleet(), workdir, STEP_SECONDS, SHIP_EVERY_TICKS, CLOCK_OFFSETS,
                  url, replica=url is not None) as rig:  # fmt: skip
        rig.run_until(rig.start + RUN_SECONDS)
        yield rig


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetRig]:
    yield from streamed(tmp_path_factory.mktemp("health") / "sqlite", None)


@pytest.fixture(scope="module")
def replica(
    tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer
) -> Iterator[FleetRig]:
    yield from streamed(tmp_path_factory.mktemp("health") / "replica", postgres.new_database())


def test_a_replica_reports_the_samples_lag_and_clocks_one_collector_does(
    one: FleetRig, replica: FleetRig
) -> None:
    expected, got = one.collector.core.service.health(), replica.collector.core.service.health()
    assert expected.pending_samples > 0  # the stream stopped inside the reorder window
    assert got.pending_samples == expected.pending_samples
    assert got.lag_seconds == expected.lag_seconds > 0
    assert set(got.clock_offsets) == {n.name for n in replica.fleet.nodes}
    for node, offset in got.clock_offsets.items():
        assert offset == pytest.approx(CLOCK_OFFSETS.get(node, 0.0), abs=0.5), node


def test_a_replica_judges_a_skewed_node_on_its_own_clock(one: FleetRig, replica: FleetRig) -> None:
    """Every replica's /v1/fleet reads the owners' published views: the same states as one
    collector's, none ``unknown`` (the 120 s behind node's were, on the collector's clock)."""
    now = replica.now
    replica.collector.core.applier.tick(commit=True)  # publishes the owned views
    expected = {v.uuid: v.state for v in one.collector.core.service.fleet(now)}
    got = {v.uuid: v.state for v in replica.collector.core.service.fleet(now)}
    assert got == expected
    assert "unknown" not in {state.value for state in got.values()}
