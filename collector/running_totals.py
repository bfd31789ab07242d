"""The ledger's all-time totals kept in memory, for /metrics' per-workload counters.

The totals are monotonic sums that change only by what each commit adds, so a re-render of
``WorkloadExporter`` after a commit need not read them from SQL (~120 ms at 10,000 GPUs):
``RunningTotals`` is seeded by one ledger read when it is built and advanced by each
commit's deltas through the ledger's observers (``write_committed``, on the writer's
thread). ``snapshot`` costs no SQL and no loop over the GPUs; the rules over the totals
(``reports.waste_totals``, ``reports.energy_totals``) run on it as on a ledger read.

- **Exactness.** The fold does what collector/ledger/writes.py does to the rows: each delta
  added to its key's total in the write's order (the same IEEE additions as SQLite's
  ``total + excluded.total``), a registry row replaced with ``first_seen`` the least and
  ``last_seen`` the greatest, a workload's last-seen the greatest and its model kept
  unless the write names one. tests/collector/test_running_totals.py checks that after
  any sequence of commits the totals equal a fresh ``LedgerTotals.read``. A delta for a
  workload (or GPU) these totals never saw registered (registered before the seed, with
  no totals then) makes the fold read the ledger again instead, after that commit and on
  the writer's thread, so no commit is missed or counted twice.
- **Restart.** Nothing is kept across processes: a new process seeds again from the
  ledger, which holds every committed delta, so the totals are still exact. The seed runs
  in ``CollectorCore.build``, before the applier can commit.
- **Pruning.** ``Ledger.prune`` deletes hourly and daily rollups, closed episodes, old
  recommendations and ack ranges; the totals tables (``gpu_usage_total``,
  ``workload_usage_total``), ``workload_stats`` and the GPU and workload registries are
  never pruned (collector/ledger/writes.py ``prune``), so a prune changes nothing here.

Attach it to the observers before the Exposition: observers are told in order, so the
totals have this commit's deltas when the exposition drops its cached part.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Sequence

import msgspec

from collector.ledger.observers import StoredBatch
from collector.ledger.store import GpuRecord, Ledger, LedgerWrite
from collector.records import Usage
from collector.reports import LedgerTotals

log = logging.getLogger(__name__)


class RunningTotals:
    """A LedgerObserver holding the all-time totals; ``snapshot`` is thread-safe, the fold
    runs on the writer's thread only (as the observers are told).

    A fold only adds to the dicts; the LedgerTotals (lists over every GPU and workload) is
    built by the next ``snapshot`` after a commit, not by each commit: a replica commits
    once per owned shard per tick (64 a second), a scrape comes every 15 s."""

    _totals: LedgerTotals | None  # None: a commit was folded in since the last build

    def __init__(self, ledger: Ledger) -> None:
        """Seeds from ``ledger`` (one read of its totals, last-seen times, models and GPU
        registry)."""
        self._ledger = ledger
        self._lock = threading.Lock()  # a fold or seed against a snapshot's build
        self._seed()

    def snapshot(self, models: dict[str, str]) -> LedgerTotals:
        """The totals as of the last commit told, with ``models`` (this process's view of
        each workload's GPU model) ahead of the ledger's. Never mutated afterwards."""
        with self._lock:
            if self._totals is None:
                self._totals = self._build()
            totals = self._totals
        return totals.with_models(models)

    def batches_stored(self, stored: Sequence[StoredBatch]) -> None:
        """Stored batches add nothing to the totals until they are applied and committed."""

    def write_committed(self, write: LedgerWrite) -> None:
        """Fold the commit's deltas in; a fold that fails part-way would leave the totals
        off until a restart, so it reads them again from the ledger (which holds the
        commit) instead, and says so once per failure."""
        try:
            self._fold(write)
        except Exception:
            log.exception("running totals: a commit could not be folded in; read again from "
                          "the ledger")  # fmt: skip
            self._seed()

    def _fold(self, write: LedgerWrite) -> None:
        if not self._knows(write):
            self._seed()
            return
        with self._lock:
            self._fold_known(write)

    def _fold_known(self, write: LedgerWrite) -> None:
        reorder = self._register_gpus(write.gpus.values())
        if _add(self._gpu_usage, write.gpu_usage.items()) or reorder:
            self._gpu_order = sorted(self._gpu_usage, key=lambda u: (self._gpus[u].node, u))
        self._workloads.update(write.workloads)
        if _add(self._workload_usage, write.workload_usage.items()):
            self._workload_order = sorted(self._workload_usage)
        last_seen, models = self._last_seen, self._models
        for key, stats in write.workload_stats.items():
            last_seen[key] = max(last_seen.get(key, stats.last_seen), stats.last_seen)
            if stats.gpu_model:
                models[key] = stats.gpu_model
        self._totals = None  # built again by the next snapshot

    def _register_gpus(self, records: Iterable[GpuRecord]) -> bool:
        """The registry rows upserted; returns whether a GPU is new or moved node."""
        reorder = False
        for record in records:
            old = self._gpus.get(record.uuid)
            if old is None or old.node != record.node:
                reorder = True
            if old is not None:
                first, last = (
                    min(old.first_seen, record.first_seen),
                    max(old.last_seen, record.last_seen),
                )
                record = dataclasses.replace(record, first_seen=first, last_seen=last)
            self._gpus[record.uuid] = record
        return reorder

    def _knows(self, write: LedgerWrite) -> bool:
        """Whether every GPU and workload the write's deltas name is registered here."""
        gpus, workloads = self._gpus, self._workloads
        return all(uuid in gpus or uuid in write.gpus for _, uuid in write.gpu_usage) and all(
            key in workloads or key in write.workloads for _, key in write.workload_usage
        )

    def _seed(self) -> None:
        ledger = self._ledger
        stored = LedgerTotals.stored(ledger)
        # the whole registry: a GPU registered without totals yet may be upserted later
        gpus = {gpu.uuid: gpu for gpu in ledger.gpus()}
        with self._lock:
            self._gpus = gpus
            self._gpu_usage = {gpu.uuid: usage for gpu, usage in stored.by_gpu}
            self._workloads = {ref.key: ref for ref, _ in stored.by_workload}
            self._workload_usage = {ref.key: usage for ref, usage in stored.by_workload}
            self._gpu_order = [gpu.uuid for gpu, _ in stored.by_gpu]  # in the ledger's order
            self._workload_order = [ref.key for ref, _ in stored.by_workload]
            self._last_seen, self._models = dict(stored.last_seen), dict(stored.models)
            self._totals = stored

    def _build(self) -> LedgerTotals:
        """The totals as the dicts hold them now (under the lock): lists and dicts of their
        own, and Usage objects a later fold copies before it adds to them."""
        gpus, gpu_usage = self._gpus, self._gpu_usage
        workloads, workload_usage = self._workloads, self._workload_usage
        return LedgerTotals(
            by_workload=[(workloads[key], workload_usage[key]) for key in self._workload_order],
            by_gpu=[(gpus[uuid], gpu_usage[uuid]) for uuid in self._gpu_order],
            last_seen=dict(self._last_seen),
            models=dict(self._models),
        )


def _add(totals: dict[str, Usage], deltas: Iterable[tuple[tuple[float, str], Usage]]) -> bool:
    """Each delta added to a copy of its key's total (a snapshot's Usage is never changed);
    returns whether a key is new."""
    copied: set[str] = set()
    added = False
    for (_, key), delta in deltas:
        if key not in copied:
            old = totals.get(key)
            added |= old is None
            totals[key] = Usage() if old is None else msgspec.structs.replace(old)
            copied.add(key)
        totals[key].add(delta)
    return added
