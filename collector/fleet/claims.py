"""Which node a GPU uuid belongs to, and the claims refused because another node has it.

A GPU uuid is one board. The same uuid from a second node while the first still reports
it is a cloned VM image, a misconfigured replay or a spoofed agent: taking it would move
the GPU to whichever node posted last and subtract one board's energy counter from the
other's. The second claim is refused (409, naming both nodes) and kept here for the API,
the console and the metrics; the first node's figures stay its own. A GPU silent on its
node for longer than ``CLAIM_HOLD_SECONDS`` (event time) may move: boards do get moved.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection, Mapping

from collector.records import DuplicateGpu

#: a node keeps its claim on a GPU this long after its newest reading of it (event time)
CLAIM_HOLD_SECONDS = 900.0
#: distinct (uuid, claimant) pairs kept; past it the oldest is forgotten (a spoofing
#: agent inventing uuids must not grow the collector's memory)
MAX_DUPLICATES = 1000


class DuplicateClaims:
    """The refused claims, one per (uuid, claiming node); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: dict[tuple[str, str], DuplicateGpu] = {}

    def refuse(self, uuid: str, node: str, claimed_by: str, at: float) -> DuplicateGpu:
        """Record that ``claimed_by`` claimed ``uuid``, which ``node`` has, at ``at``."""
        key = (uuid, claimed_by)
        with self._lock:
            seen = self._refused.pop(key, None)
            if seen is None:
                seen = DuplicateGpu(uuid, node, claimed_by, at, at, 1)
            else:
                seen = dataclasses.replace(
                    seen, node=node, last_refused_at=at, batches_refused=seen.batches_refused + 1
                )
            self._refused[key] = seen  # re-inserted: the dict is in last-refused order
            while len(self._refused) > MAX_DUPLICATES:
                del self._refused[next(iter(self._refused))]
            return seen

    def forget(self, uuids: Collection[str], nodes: Collection[str]) -> None:
        """Drop the claims on forgotten GPUs and by forgotten nodes (collector/fleet/live.py)."""
        with self._lock:
            self._refused = {
                key: dup
                for key, dup in self._refused.items()
                if key[0] not in uuids and key[1] not in nodes
            }

    def all(self) -> list[DuplicateGpu]:
        """Every refused claim, most recently refused last."""
        with self._lock:
            return list(self._refused.values())


class PublishedHolders:
    """Which node has each GPU by what the shards' owners last published (a replica's
    front, collector/replicas.py): the front buffers nothing, so it cannot know from its
    own fleet. A node has a GPU while its owner published the GPU's view within
    ``CLAIM_HOLD_SECONDS`` (collector clock): an owner publishes a reporting GPU's view
    every few seconds (its newest reading moves), so this is the hold on the collector's
    clock where one collector holds it on the node's event time. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[str, tuple[str, float]] = {}  # uuid -> (node, published at)
        self._on_node: dict[str, set[str]] = {}

    def refresh(self, rows: Collection[tuple[str, str, float]], now: float) -> None:
        """Every published GPU: (uuid, node, seconds since its owner published it)."""
        holders = {uuid: (node, now - age) for uuid, node, age in rows}
        on_node: dict[str, set[str]] = {}
        for uuid, (node, _) in holders.items():
            on_node.setdefault(node, set()).add(uuid)
        with self._lock:
            self._holders, self._on_node = holders, on_node

    def placement(self) -> tuple[Mapping[str, object], Mapping[str, set[str]]]:
        """The fleet's GPUs (uuid -> its node and when published) and each node's, as the
        owners track them: what the front's memory bounds count (collector/fleet/limits.py)."""
        with self._lock:
            return self._holders, self._on_node

    def holder(self, uuid: str, at: float) -> str | None:
        """The node that has ``uuid`` at ``at`` (collector clock), if any."""
        with self._lock:
            found = self._holders.get(uuid)
        if found is None or at - found[1] > CLAIM_HOLD_SECONDS:
            return None
        return found[0]
