"""The pure shard rules: a stable hash, and targets that always converge to one owner each."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from collector.cluster.shards import claim_count, shard_of, shards_to_release, target_count
from tests.paths import REPO


@given(st.text(min_size=1, max_size=40), st.integers(1, 4096))
def test_a_node_falls_in_one_of_the_shards(node: str, shard_count: int) -> None:
    assert 0 <= shard_of(node, shard_count) < shard_count


def test_the_shard_is_the_same_in_every_process() -> None:
    """Python's str hash is salted per process; shard_of must not be."""
    nodes = [f"gpu-node-{i}" for i in range(200)]
    code = (
        "import sys; from collector.cluster.shards import shard_of; "
        "print(','.join(str(shard_of(n, 64)) for n in sys.argv[1:]))"
    )
    answers = set()
    for seed in ("1", "2"):
        environ = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-c", code, *nodes], env=environ,
                             capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
        answers.add(out.stdout.strip())
    here = ",".join(str(shard_of(n, 64)) for n in nodes)
    assert answers == {here}
    assert len(set(here.split(","))) > 32  # spread, not one shard


@given(st.integers(1, 4096), st.integers(1, 500))
def test_targets_cover_every_shard_and_differ_by_less_than_one(shards: int, live: int) -> None:
    target = target_count(shards, live)
    assert target * live >= shards
    assert (target - 1) * live < shards


@given(st.frozensets(st.integers(0, 255)), st.integers(0, 300))
def test_release_keeps_the_target_and_gives_up_only_own_shards(
    owned: frozenset[int], target: int
) -> None:
    released = shards_to_release(owned, target)
    assert released <= owned
    assert len(owned - released) == min(len(owned), target)
    assert claim_count(len(owned - released), target) == max(0, target - len(owned))


class Model:
    """The lease table as the policy sees it: shard -> owner; free when the owner is gone.

    Each tick does what leases.ShardLeases.tick does in SQL: keep own shards, release past
    the target, claim free ones up to it (a dead replica's shards are free: expired)."""

    def __init__(self, shard_count: int) -> None:
        self.shard_count = shard_count
        self.owner: dict[int, str] = {}
        self.live: set[str] = set()

    def tick(self, replica: str) -> None:
        self.live.add(replica)
        held = {s for s, o in self.owner.items() if o == replica}
        target = target_count(self.shard_count, len(self.live))
        for shard in shards_to_release(held, target):
            del self.owner[shard]
            held.discard(shard)
        free = [s for s in range(self.shard_count) if self.owner.get(s) not in self.live]
        for shard in free[: claim_count(len(held), target)]:
            assert self.owner.get(shard) not in self.live, "took a live replica's shard"
            self.owner[shard] = replica

    def kill(self, replica: str) -> None:
        self.live.discard(replica)


events = st.lists(
    st.tuples(st.sampled_from(["tick", "kill"]), st.integers(0, 7)), min_size=1, max_size=60
)


@settings(max_examples=300)
@given(st.integers(1, 128), events, st.integers(1, 8))
def test_every_shard_ends_with_exactly_one_live_owner(
    shard_count: int, history: list[tuple[str, int]], survivors: int
) -> None:
    model = Model(shard_count)
    for action, n in history:
        getattr(model, action)(f"r{n}")
    alive = (sorted(model.live) or ["r0"])[:survivors]  # the others die now
    model.live = set(alive)
    for _ in range(3):  # rounds of every live replica ticking, in turn
        for replica in alive:
            model.tick(replica)
    owners = [model.owner.get(s) for s in range(shard_count)]
    assert all(o in model.live for o in owners), "a shard without a live owner"
    target = target_count(shard_count, len(alive))
    for replica in alive:
        assert owners.count(replica) <= target
