"""Which shard a node falls in, and how many shards each replica should hold: pure.

``shard_of`` is a stable hash (BLAKE2b, not Python's per-process salted ``hash``), so
every replica and every restart puts a node in the same shard. The shard count is fixed
for the life of a deployment: changing it moves nodes between shards.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Set


def shard_of(node: str, shard_count: int) -> int:
    """The shard (0 .. shard_count-1) of ``node``."""
    if shard_count < 1:
        raise ValueError(f"shard_count: must be >= 1, got {shard_count}")
    digest = hashlib.blake2b(node.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shard_count


def target_count(shard_count: int, live_replicas: int) -> int:
    """How many shards each live replica aims at: ceil(S / live replicas).

    ``live_replicas`` counts the asking replica, so it is at least 1."""
    return math.ceil(shard_count / max(1, live_replicas))


def shards_to_release(owned: Set[int], target: int) -> frozenset[int]:
    """The shards a replica over its target gives up: its highest-numbered extras.

    Giving up the highest ones (not random ones) makes a rebalance move few shards: the
    replica keeps the low ones it has held longest, and joiners take what is freed."""
    extra = len(owned) - target
    if extra <= 0:
        return frozenset()
    return frozenset(sorted(owned)[-extra:])


def claim_count(owned: int, target: int) -> int:
    """How many free shards a replica under its target tries to claim."""
    return max(0, target - owned)
