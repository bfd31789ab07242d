"""The demo's fleet: ``--nodes`` x ``--gpus-per-node`` simulated nodes, and the nodes that
show what real fleets do to the figures when asked: a MIG node (``--mig``), a node whose
clock is off (``--skew``), a node cut off from the collector for a while (``--outage``) and
a VM cloned from another's image (``--clone``), and a node nobody uses (``--spare``)."""

from __future__ import annotations

import argparse

from agent.sources.simulated.hardware import gpu_model
from agent.sources.simulated.mig import EXAMPLE_LAYOUTS
from agent.sources.simulated.plan import build_gpus
from agent.sources.simulated.shared import build_shared_node
from agent.sources.simulated.source import SimulatedFleet, SimulatedNode, build_fleet
from gpufleet.cli.demo_fleet import Outage
from gpufleet.cli.demo_pace import SimClock

#: the node ``--spare`` adds: nobody runs anything on it
SPARE_NODE = "gpu-node-spare"
SPARE_GPUS = 8
#: the node ``--shared`` adds (agent/sources/simulated/shared.py's example GPUs)
SHARED_NODE = "gpu-node-shared"
#: the node ``--skew`` adds, its clock that many seconds off
SKEWED_NODE = "gpu-node-skewed"
#: the node ``--outage`` adds, and when in the live run its outage begins
OUTAGE_NODE = "gpu-node-outage"
OUTAGE_AFTER_SECONDS = 300.0


def demo_fleet(args: argparse.Namespace, start: float) -> SimulatedFleet:
    """``--nodes`` x ``--gpus-per-node``, plus the MIG node, the skewed node, the node with
    an outage and the clone when asked."""
    fleet = build_fleet(args.nodes, args.gpus_per_node, seed=args.seed, start_time=start)
    nodes = list(fleet.nodes)
    if getattr(args, "mig", False):
        layouts = EXAMPLE_LAYOUTS
        nodes.append(
            SimulatedNode.build_mig("gpu-node-mig", layouts, seed=args.seed, start_time=start)
        )
    if getattr(args, "shared", False):  # ``--shared``: pods sharing whole GPUs
        nodes.append(SimulatedNode(SHARED_NODE, build_shared_node(SHARED_NODE, args.seed, start)))
    if getattr(args, "skew", None):
        models = ["A100"] * args.gpus_per_node
        nodes.append(SimulatedNode.build(SKEWED_NODE, models, seed=args.seed, start_time=start))
    if getattr(args, "outage", None):
        models = ["L4"] * args.gpus_per_node
        nodes.append(SimulatedNode.build(OUTAGE_NODE, models, seed=args.seed, start_time=start))
    if getattr(args, "spare", False):
        boards = [gpu_model("A100")] * SPARE_GPUS
        nodes.append(
            SimulatedNode(SPARE_NODE, build_gpus(SPARE_NODE, boards, [], args.seed, start))
        )
    if getattr(args, "clone", False):
        nodes.append(nodes[0].clone(f"{nodes[0].name}-clone"))
    return SimulatedFleet(nodes)


def node_clock_offset(args: argparse.Namespace, node: str) -> float:
    """How far ``node``'s clock is off the collector's (``--skew`` for the skewed node)."""
    skew: float | None = getattr(args, "skew", None)
    return (skew or 0.0) if node == SKEWED_NODE else 0.0


def outage_of(
    args: argparse.Namespace, node: str, live_start: float, clock: SimClock
) -> Outage | None:
    """The network of ``--outage``'s node: down for that many simulated minutes, from
    ``OUTAGE_AFTER_SECONDS`` after the live run starts at ``live_start``."""
    minutes: float | None = getattr(args, "outage", None)
    if not minutes or node != OUTAGE_NODE:
        return None
    start = live_start + OUTAGE_AFTER_SECONDS
    return Outage(clock, start, start + minutes * 60.0)
