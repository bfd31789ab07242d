"""The live fleet's memory bounds: GPUs per node and per fleet, live workloads, values of
the free-form labels that reach /metrics, and when a silent GPU is forgotten.

Why: every GPU uuid costs live state (its reorder buffer, ~1.5 KiB) and series on every
/metrics scrape, and every workload and label value more series; an agent inventing uuids
(25,000 in one 136 KiB body added ~770 MiB) or a fleet past what one collector carries
would grow memory and the scrape without bound. So a batch that would pass a bound is
refused whole, after it decoded and before it is stored: a refused batch changes nothing.

Statuses. A batch listing more GPUs than ``ingest.max_gpus_per_node`` can never pass: it
is the sender's fault, 422 (the agent drops it and says why). Every other bound is about
what the fleet holds now, which changes as silent GPUs, workloads and label values are
forgotten (``ingest.forget_after_seconds``) or the operator raises the setting: 429 with
``Retry-After``, so the agent keeps the batch in its spool and nothing it measured is lost.
That includes a node whose remembered GPUs and the batch's together pass the per-node
bound (its boards were swapped): the old ones are forgotten in time.

Forgetting is by the collector's clock of the last batch that listed the GPU (after a
restart, until one comes: the ledger's last applied sample, on the node's clock).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent.model import Batch, Workload
from collector.backend import IngestError, RejectReason
from collector.config import IngestSettings

#: the Retry-After of a 429 for a bound: it clears only as GPUs are forgotten or the
#: operator raises the setting, so a minute between retries keeps refusing cheap
LIMIT_RETRY_AFTER_SECONDS = 60
#: the free-form values bounded by ``ingest.max_label_values``, each a /metrics label
LABEL_KINDS = ("region", "namespace", "team")


@dataclass(frozen=True, slots=True)
class FleetLimits:
    """The bounds in force (collector/config.py IngestSettings documents each)."""

    gpus_per_node: int = 64
    gpus: int = 50_000
    workloads: int = 100_000
    label_values: int = 1000
    forget_after_seconds: float = 24 * 3600.0

    @classmethod
    def of(cls, ingest: IngestSettings) -> FleetLimits:
        return cls(
            ingest.max_gpus_per_node,
            ingest.max_gpus,
            ingest.max_workloads,
            ingest.max_label_values,
            ingest.forget_after_seconds,
        )


@dataclass(frozen=True, slots=True)
class Breach:
    """A bound a batch would pass: what, by how much, and whether it can ever pass."""

    what: str  # "GPUs on node 'n1'"
    setting: str  # "ingest.max_gpus_per_node"
    limit: int
    would_be: int
    field: str | None = None
    #: the batch alone passes the bound: it never will pass (422), else 429
    permanent: bool = False

    def error(self, samples: int) -> IngestError:
        """The refusal: the one place a bound's message and status are worded."""
        past = f"{self.what} would be {self.would_be}, past the limit of {self.limit}"
        if self.permanent:
            message = f"batch refused: {past} ({self.setting}); send fewer, or raise the setting"
        else:
            message = (
                f"batch refused for now: {past} ({self.setting}); retry later (what is "
                "silent for ingest.forget_after_seconds is forgotten), or raise the setting"
            )
        err = IngestError(
            422 if self.permanent else 429,
            message,
            field=self.field,
            reason=RejectReason.LIMIT_EXCEEDED,
        )
        err.samples = samples
        if not self.permanent:
            err.retry_after_seconds = LIMIT_RETRY_AFTER_SECONDS
        return err


@dataclass(slots=True)
class GroupTally:
    """What the batches taken so far in one group write add: new GPU uuids (-> node) and
    per node how many GPUs it gains (its bounds count them before they are buffered)."""

    new_gpus: dict[str, str] = field(default_factory=dict)
    node_gains: Counter[str] = field(default_factory=Counter)


class FleetBounds:
    """Which GPUs each node has and when each was last heard of, and the bounded values
    with when each was last seen (collector clock). The live fleet's lock guards it."""

    def __init__(self, limits: FleetLimits) -> None:
        self.limits = limits
        self.node_gpus: dict[str, set[str]] = {}
        #: gpu uuid -> when a batch last listed it (collector clock)
        self.heard: dict[str, float] = {}
        #: kind ("workload", "region", ...) -> value -> when last seen (collector clock)
        self.values: dict[str, dict[str, float]] = {k: {} for k in ("workload", *LABEL_KINDS)}

    def check(
        self,
        batch: Batch,
        known: Mapping[str, object],
        at: float,
        tally: GroupTally,
        node_gpus: Mapping[str, set[str]] | None = None,
    ) -> Breach | None:
        """The first bound ``batch`` would pass, given the ``known`` GPUs (and each node's,
        ``node_gpus``: by default the ones this fleet placed) and what the group's earlier
        batches add (``tally``); None when it may be taken, and then its GPUs and values
        are counted in (``tally``, values seen at ``at``)."""
        limits = self.limits
        node_gpus = self.node_gpus if node_gpus is None else node_gpus
        uuids = [info.uuid for info in batch.gpus]
        if len(uuids) > limits.gpus_per_node:
            field_path = f"$.gpus[{limits.gpus_per_node}]"
            what = f"GPUs listed by node {batch.node!r}"
            return Breach(
                what,
                "ingest.max_gpus_per_node",
                limits.gpus_per_node,
                len(uuids),
                field_path,
                permanent=True,
            )
        on_node = node_gpus.get(batch.node, set())
        gains = [u for u in uuids if u not in on_node]
        node_total = len(on_node) + tally.node_gains[batch.node] + len(gains)
        if node_total > limits.gpus_per_node:
            return Breach(
                f"GPUs of node {batch.node!r}",
                "ingest.max_gpus_per_node",
                limits.gpus_per_node,
                node_total,
                "$.gpus",
            )
        new = [u for u in gains if u not in known and u not in tally.new_gpus]
        fleet_total = len(known) + len(tally.new_gpus) + len(new)
        if new and fleet_total > limits.gpus:
            return Breach(
                "GPUs in the fleet", "ingest.max_gpus", limits.gpus, fleet_total, "$.gpus"
            )
        seen = batch_values(batch)
        for kind, values in seen.items():
            if (breach := self._past(kind, values)) is not None:
                return breach
        for kind, values in seen.items():
            book = self.values[kind]
            for value in values:
                book[value] = at
        tally.new_gpus.update((u, batch.node) for u in new)
        tally.node_gains[batch.node] += len(gains)
        return None

    def _past(self, kind: str, values: set[str]) -> Breach | None:
        book = self.values[kind]
        fresh = sum(1 for v in values if v not in book)
        if not fresh:
            return None
        if kind == "workload":
            limit, setting, what = self.limits.workloads, "ingest.max_workloads", "live workloads"
        else:
            limit, setting = self.limits.label_values, "ingest.max_label_values"
            what = f"distinct values of label {kind!r}"
        total = len(book) + fresh
        return Breach(what, setting, limit, total) if total > limit else None

    def heard_from(self, batch: Batch, at: float) -> None:
        """``batch`` (received at ``at``, collector clock) listed its GPUs: they are live."""
        heard = self.heard
        for info in batch.gpus:
            heard[info.uuid] = at

    def placed(self, uuid: str, old_node: str | None, node: str) -> None:
        """``uuid`` is tracked on ``node`` now (``old_node``: where it was, if anywhere)."""
        if old_node is not None and old_node != node:
            self.node_gpus.get(old_node, set()).discard(uuid)
        self.node_gpus.setdefault(node, set()).add(uuid)

    def silent(self, uuids: Iterable[str], now: float) -> list[str]:
        """Those of ``uuids`` not heard of for ``forget_after_seconds`` before ``now``; a
        GPU with no time yet (replayed after a restart) is heard of at ``now``."""
        horizon = now - self.limits.forget_after_seconds
        heard = self.heard
        return [u for u in uuids if heard.setdefault(u, now) < horizon]

    def forget(self, gpus: Mapping[str, str], now: float) -> list[str]:
        """Drop the GPUs ``gpus`` (uuid -> node) and the values not seen for
        ``forget_after_seconds``; returns the nodes left without a GPU."""
        for uuid, node in gpus.items():
            self.heard.pop(uuid, None)
            self.node_gpus.get(node, set()).discard(uuid)
        emptied = [n for n in {*gpus.values()} if not self.node_gpus.get(n)]
        for node in emptied:
            self.node_gpus.pop(node, None)
        horizon = now - self.limits.forget_after_seconds
        for kind, book in self.values.items():
            self.values[kind] = {v: t for v, t in book.items() if t >= horizon}
        return emptied


def batch_values(batch: Batch) -> dict[str, set[str]]:
    """The bounded values ``batch`` carries: workload keys, and per label kind its values.
    A GPU's holders are read once per change (they stay the same for many samples)."""
    workloads: set[str] = set()
    namespaces: set[str] = set()
    teams: set[str] = set()
    last: dict[str, tuple[Workload, ...]] = {}
    for sample in batch.samples:
        held = sample.workloads
        if not held or last.get(sample.gpu_uuid) == held:
            continue
        last[sample.gpu_uuid] = held
        for w in held:
            workloads.add(w.key)
            if w.namespace is not None:
                namespaces.add(w.namespace)
            if w.team is not None:
                teams.add(w.team)
    region = batch.node_labels.get("region")
    return {
        "workload": workloads,
        "region": {region} if region is not None else set(),
        "namespace": namespaces,
        "team": teams,
    }
