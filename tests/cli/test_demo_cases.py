"""``gpufleet demo --mig --clone`` adds the MIG node and the cloned node to the fleet."""

from __future__ import annotations

import argparse

from agent.sources.simulated.source import DEFAULT_START_TIME
from gpufleet.cli.demo import demo_fleet


def args(**flags: object) -> argparse.Namespace:
    return argparse.Namespace(nodes=2, gpus_per_node=2, seed=0, **flags)


def test_the_demo_fleet_grows_a_mig_node_and_a_clone_only_when_asked() -> None:
    plain = demo_fleet(args(mig=False, clone=False), DEFAULT_START_TIME)
    assert [n.name for n in plain.nodes] == ["gpu-node-00", "gpu-node-01"]
    fleet = demo_fleet(args(mig=True, clone=True), DEFAULT_START_TIME)
    names = [n.name for n in fleet.nodes]
    assert names == ["gpu-node-00", "gpu-node-01", "gpu-node-mig", "gpu-node-00-clone"]
    mig = fleet.nodes[2].discover()
    assert sum(info.mig_enabled for info in mig) == 2
    assert {info.mig_profile for info in mig} >= {"3g.40gb", "2g.20gb", "1g.10gb", "4g.40gb"}
    clone = {info.uuid for info in fleet.nodes[3].discover()}
    assert clone == {info.uuid for info in fleet.nodes[0].discover()}


def test_the_spare_node_holds_eight_a100s_that_nobody_uses() -> None:
    fleet = demo_fleet(args(spare=True), DEFAULT_START_TIME)
    spare = fleet.nodes[-1]
    assert [n.name for n in fleet.nodes] == ["gpu-node-00", "gpu-node-01", "gpu-node-spare"]
    assert ["A100" in info.name for info in spare.discover()] == [True] * 8
    for hour in range(3):
        samples = spare.read(DEFAULT_START_TIME + 3600 * hour)
        assert len(samples) == 8 and all(not s.workloads and not s.processes for s in samples)
