"""Turns applied intervals into ledger deltas: usage per GPU-hour and workload-hour (energy,
idle, cost, carbon), right-sizing statistics, and the GPU registry rows.

Prices and grid intensity come from ``Rates`` (rates.py), which reports and
recommendations share.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import msgspec

from agent.model import GpuInfo
from collector.accounting.rates import Rates
from collector.analysis.shared import shared_parts
from collector.analysis.usage import IntervalSums, energy_part, workload_part
from collector.fleet.state import Applied, TrackedGpu
from collector.ledger.records import GpuRecord, LedgerWrite, WorkloadStatsDelta
from collector.records import HOUR_SECONDS, Interval, SharedUse, Usage, WorkloadRef

#: a GPU's registry row is rewritten when its identity changes, else at most this often
#: (its ``last_seen`` is that coarse; cursors and hourly rows carry the exact times)
LAST_SEEN_RESOLUTION_SECONDS = 60.0


class Accountant:
    """Turns each GPU's applied intervals into the ledger's hourly deltas, priced and
    carbon-counted with ``rates``; keeps what it already sent (registry rows)."""

    def __init__(self, rates: Rates, idle_threshold: float) -> None:
        self.rates = rates
        #: ``analysis.idle_threshold``: a shared GPU's holder below it is idle on its own
        self.idle_threshold = idle_threshold
        self._first_seen: dict[str, float] = {}
        self._workload_gpus: dict[str, set[str]] = {}
        self._workload_models: dict[str, str] = {}
        #: uuid -> ((info, node, model), last_seen) of the registry row last sent
        self._registered: dict[str, tuple[tuple[GpuInfo, str, str], float]] = {}
        #: workload key -> the registry row last sent
        self._workload_refs: dict[str, WorkloadRef] = {}

    def account(
        self, gpu: TrackedGpu, applied: Applied, node_labels: dict[str, str], write: LedgerWrite
    ) -> None:
        """Add what ``applied`` contributes to ``write`` (usage, episodes, stats).

        Consecutive intervals in the same hour with the same holders are summed first
        (``IntervalSums``, and one right-sizing histogram for all their holders), so Usage
        rows and statistics are built per run, not per interval.
        """
        rates = self.rates
        region = rates.region_of(gpu.node, node_labels)
        # a MIG slice costs its share of the parent, the parent what no slice covers
        price = rates.price_per_gpu_hour(gpu.model, gpu.node) * gpu.price_fraction
        pue = rates.pue
        hourly = rates.varies_hourly(region)  # else constant within the hour
        intervals = _split_at_hours(applied.intervals)
        first, count = 0, len(intervals)
        while first < count:  # one run per pass: same hour, same holders
            head = intervals[first]
            run = _Run(math.floor(head.start / HOUR_SECONDS) * HOUR_SECONDS, head.shares)
            run.sharing = head.sharing  # one holders object, one sharing: the same run
            hour, hour_end, shares = run.hour, run.hour_end, run.shares
            stop = first + 1
            while stop < count:
                interval = intervals[stop]
                if interval.shares is not shares or not hour <= interval.start < hour_end:
                    break
                stop += 1
            members = intervals[first:stop]
            if hourly:  # an hourly feed may change within the hour: each at its own
                for interval in members:
                    run.sums.add(interval, pue, rates.intensity_at(region, interval.start))
            else:
                run.sums.add_all(members, pue, rates.intensity_at(region, head.start))
            run.end = members[-1].end  # one GPU's intervals are in time order
            if run.observed is not None:  # right-sizing: memory and SM activity held
                run.observed.observe_all(members)
            self._close(run, gpu, price, write)
            first = stop
        write.episodes_closed.extend(applied.episodes_closed)

    def _close(self, run: _Run, gpu: TrackedGpu, price: float, write: LedgerWrite) -> None:
        """Add a run's usage to the GPU's and its workloads' hourly deltas."""
        uuid = gpu.info.uuid
        usage = run.sums.usage(price, allocated=bool(run.shares))
        _add(write.gpu_usage, (run.hour, uuid), usage)
        if gpu.info.mig_enabled:
            self._close_mig_parent(run, usage, write)
            return
        stats_deltas = write.workload_stats
        # a slice's holder runs on the slice, not the whole GPU (right-sizing starts there)
        profile = gpu.info.mig_profile
        model = f"{gpu.model} MIG {profile}" if profile else gpu.model
        parts = self._parts(run, usage, price)
        for ref, part in parts.items():
            _add(write.workload_usage, (run.hour, ref.key), part)
            stats = stats_deltas.get(ref.key)
            if stats is None:
                stats = stats_deltas[ref.key] = WorkloadStatsDelta()
            if run.sharing is not None:  # a shared GPU: each holder's own memory and use
                _observe_own(stats, run, ref)
            elif run.observed is not None:
                stats.merge(run.observed)
            sent = self._workload_refs.get(ref.key)
            if sent is not ref and sent != ref:  # registry rows only when new or changed
                write.workloads[ref.key] = self._workload_refs[ref.key] = ref
            held = self._workload_gpus.setdefault(ref.key, set())
            held.add(uuid)
            stats.gpu_model = model
            self._workload_models[ref.key] = model
            stats.gpu_count = len(held)
            stats.last_seen = max(stats.last_seen, run.end)

    def _parts(self, run: _Run, usage: Usage, price: float) -> dict[WorkloadRef, Usage]:
        """Each holder's Usage of the run: its share of the GPU's, or on a shared GPU its
        held fraction by its own activity (analysis/shared.py)."""
        if run.sharing is None:
            return {ref: workload_part(usage, share) for ref, share in run.shares.items()}
        return shared_parts(run.sums, price, run.shares, run.sharing, self.idle_threshold)

    @staticmethod
    def _close_mig_parent(run: _Run, usage: Usage, write: LedgerWrite) -> None:
        """A MIG parent's holders are its slices' (``run.shares``, by slice activity):
        they get the parent's energy and carbon only. Their seconds, cost and statistics
        come from the slices they hold, so the parent's own activity (often unknown: NVML
        has none under MIG) never adds unknown seconds or a second price to them."""
        for ref, share in run.shares.items():
            _add(write.workload_usage, (run.hour, ref.key), energy_part(usage, share))

    def workload_models(self) -> dict[str, str]:
        """Workload key -> GPU model it was last seen on."""
        return dict(self._workload_models)

    def forget_gpus(self, uuids: Collection[str]) -> None:
        """GPUs that left the live fleet (collector/fleet/limits.py): what was sent of them
        goes; a GPU that comes back is registered again."""
        for uuid in uuids:
            self._first_seen.pop(uuid, None)
            self._registered.pop(uuid, None)

    def gpu_record(self, gpu: TrackedGpu) -> GpuRecord | None:
        """The GPU's registry row when it is new to this process, its identity changed, or
        its ``last_seen`` moved ``LAST_SEEN_RESOLUTION_SECONDS`` since the row last sent;
        else None (the ledger already has it). ``first_seen`` is this process's first
        commit of the GPU; the ledger keeps the earliest across restarts."""
        last_seen = gpu.last.timestamp if gpu.last is not None else 0.0
        identity = (gpu.info, gpu.node, gpu.model)
        sent = self._registered.get(gpu.info.uuid)
        if (
            sent is not None
            and sent[0] == identity
            and last_seen - sent[1] < LAST_SEEN_RESOLUTION_SECONDS
        ):
            return None
        self._registered[gpu.info.uuid] = (identity, last_seen)
        first_seen = self._first_seen.setdefault(gpu.info.uuid, last_seen)
        return GpuRecord(
            uuid=gpu.info.uuid,
            node=gpu.node,
            model=gpu.model,
            name=gpu.info.name,
            index=gpu.info.index,
            first_seen=first_seen,
            last_seen=last_seen,
            info_json=msgspec.json.encode(gpu.info),
            mig_parent_uuid=gpu.info.mig_parent_uuid,
            mig_profile=gpu.info.mig_profile,
        )


def _split_at_hours(intervals: list[Interval]) -> list[Interval]:
    """``intervals`` (one GPU's, in order) with each that crosses an hour boundary cut
    there, seconds and energy shared pro rata, so every hour gets its own part (at 1 Hz
    that is one interval per GPU-hour; after a long gap, the gap's unknown seconds)."""
    if not intervals:
        return intervals
    first_hour_end = (math.floor(intervals[0].start / HOUR_SECONDS) + 1) * HOUR_SECONDS
    if intervals[-1].end <= first_hour_end:  # the usual apply: all within one hour
        return intervals
    out: list[Interval] = []
    for interval in intervals:
        out.extend(_hour_parts(interval))
    return out


def _hour_parts(interval: Interval) -> list[Interval]:
    start, end = interval.start, interval.end
    boundary = (math.floor(start / HOUR_SECONDS) + 1) * HOUR_SECONDS
    if end <= boundary:
        return [interval]
    parts, seconds, left = [], end - start, interval.energy_joules
    while start < end:
        stop = min(boundary, end)
        # the last part takes what is left, so the parts add up to the interval exactly
        joules = left if stop == end else interval.energy_joules * (stop - start) / seconds
        parts.append(msgspec.structs.replace(interval, start=start, end=stop, energy_joules=joules))
        start, boundary, left = stop, boundary + HOUR_SECONDS, left - joules
    return parts


def _observe_own(stats: WorkloadStatsDelta, run: _Run, ref: WorkloadRef) -> None:
    """A shared GPU's holder's right-sizing observation: its own memory and SM share over
    the run (the GPU's figures are every holder's together)."""
    sharing = run.sharing
    if sharing is not None and run.observed is not None:
        seconds = run.observed.observed_seconds
        stats.observe(seconds, sharing.memory_bytes.get(ref), sharing.sm_shares.get(ref))


class _Run:
    """Consecutive intervals of one GPU in one hour with the same holders."""

    __slots__ = ("end", "hour", "hour_end", "observed", "shares", "sharing", "sums")

    def __init__(self, hour: float, shares: dict[WorkloadRef, float]):
        self.hour = hour
        self.hour_end = hour + HOUR_SECONDS
        self.shares = shares
        self.sharing: SharedUse | None = None
        self.sums = IntervalSums()
        self.end = float("-inf")
        #: what each holder saw of the GPU (memory, SM activity), merged into each at close
        self.observed = WorkloadStatsDelta() if shares else None


def _add(target: dict[tuple[float, str], Usage], key: tuple[float, str], usage: Usage) -> None:
    existing = target.get(key)
    if existing is None:
        target[key] = usage
    else:
        existing.add(usage)
