"""The consolidate rule on hand-made fleet views: what it refuses to plan on."""

from __future__ import annotations

import msgspec

from collector.records import GpuState, GpuView, RecommendationKind
from tests.collector.recommend.test_lifecycle import NOTEBOOK, TRAINING, WINDOW, gpu, run


def two_nodes(*extra: GpuView) -> list[GpuView]:
    """n1's one job fits on n2's free GPU (and the other way round)."""
    return [
        gpu("A", GpuState.ACTIVE, node="n1", holders=(TRAINING,)),
        gpu("B", GpuState.UNALLOCATED, WINDOW, node="n1"),
        gpu("C", GpuState.ACTIVE, node="n2", holders=(NOTEBOOK,)),
        gpu("D", GpuState.UNALLOCATED, WINDOW, node="n2"),
        *extra,
    ]


def consolidations(gpus: list[GpuView]) -> list[str]:
    return [r.node for r in run(gpus) if r.kind is RecommendationKind.CONSOLIDATE]


def test_one_of_two_half_empty_nodes_is_freed_not_both() -> None:
    assert consolidations(two_nodes()) == ["n1"]


def test_no_plan_on_unknown_data_or_room_not_idle_for_the_window() -> None:
    assert consolidations(two_nodes(gpu("E", GpuState.UNKNOWN, node="n2"))) == []
    short = two_nodes()
    short[3] = gpu("D", GpuState.UNALLOCATED, WINDOW - 1, node="n2")
    short[1] = gpu("B", GpuState.UNALLOCATED, WINDOW - 1, node="n1")
    assert consolidations(short) == []


def test_a_busy_gpu_nobody_holds_blocks_its_node() -> None:
    """Work the agent could not attribute still runs there: the node cannot be drained,
    and its idle GPU is no room either."""
    busy = gpu("E", GpuState.UNALLOCATED, None, node="n2")  # unallocated, not idle
    assert consolidations(two_nodes(busy)) == []


def test_mig_nodes_are_left_out() -> None:
    views = two_nodes()
    views[2] = msgspec.structs.replace(
        views[2], mig_parent_uuid="GPU-parent", mig_profile="3g.40gb"
    )
    assert consolidations(views) == []


def test_workloads_sharing_a_gpu_move_together_and_need_room_for_all_their_gpus() -> None:
    shared = [
        gpu("A", GpuState.ACTIVE, node="n1", holders=(TRAINING, NOTEBOOK)),
        gpu("B", GpuState.ACTIVE, node="n1", holders=(NOTEBOOK,)),  # NOTEBOOK spans A and B
        gpu("C", GpuState.ACTIVE, node="n2", holders=(TRAINING,)),
        gpu("D", GpuState.UNALLOCATED, WINDOW, node="n2"),
        gpu("E", GpuState.UNALLOCATED, WINDOW, node="n3"),
        gpu("F", GpuState.ACTIVE, node="n3", holders=(TRAINING,)),
    ]
    # n1's unit needs 2 GPUs on one node: n2 and n3 have one free each; n2 goes to n3
    recs = [r for r in run(shared) if r.kind is RecommendationKind.CONSOLIDATE]
    assert [r.node for r in recs] == ["n2"]
    [move] = recs[0].evidence["moves"]  # type: ignore[misc]
    assert (move["to_node"], move["to_gpus"]) == ("n3", ["E"])
