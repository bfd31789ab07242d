"""Turns applied intervals into ledger deltas: usage per GPU-hour and workload-hour (energy,
idle, cost, carbon), right-sizing statistics, and the GPU registry rows.

Prices come from the price book, grid intensity from the node's region (its ``region``
label, else ``carbon.node_regions``, else the default region) or an hourly feed.
"""

from __future__ import annotations

import logging
import math

from agent.model import GpuInfo
from collector.carbon import HourlyFeed, IntensityTable, UnknownRegionError
from collector.config import CarbonSettings
from collector.cost import PriceBook, canonical_model
from collector.fleet import Applied, TrackedGpu
from collector.ledger_records import GpuRecord, LedgerWrite, WorkloadStatsDelta
from collector.records import HOUR_SECONDS, Interval, Usage
from collector.usage import account_interval

log = logging.getLogger(__name__)


class Accountant:
    def __init__(
        self,
        prices: PriceBook,
        intensity: IntensityTable,
        carbon: CarbonSettings,
        feed: HourlyFeed | None = None,
    ) -> None:
        self.prices = prices
        self.intensity = intensity
        self.carbon = carbon
        self.feed = feed
        self._warned: set[str] = set()
        self._first_seen: dict[str, float] = {}
        self._workload_gpus: dict[str, set[str]] = {}
        self._workload_models: dict[str, str] = {}

    @property
    def currency(self) -> str:
        return self.prices.currency

    def model_of(self, info: GpuInfo) -> str:
        return canonical_model(info.name)

    def region_of(self, node: str, node_labels: dict[str, str]) -> str:
        return node_labels.get("region") or self.carbon.node_regions.get(node) or self.carbon.region

    def intensity_at(self, region: str, ts: float) -> float:
        """gCO2e/kWh for ``region`` at ``ts``; an unknown region falls back to the default
        region (logged once), never fails accounting."""
        if self.feed is not None and region == self.carbon.region:
            return self.feed.intensity_g_per_kwh(ts)
        try:
            return self.intensity.intensity_g_per_kwh(region, ts)
        except UnknownRegionError as err:
            if region not in self._warned:
                self._warned.add(region)
                log.warning("%s; using region %r", err, self.carbon.region)
            return self.intensity.intensity_g_per_kwh(self.carbon.region, ts)

    def account(
        self, gpu: TrackedGpu, applied: Applied, node_labels: dict[str, str], write: LedgerWrite
    ) -> None:
        """Add what ``applied`` contributes to ``write`` (usage, episodes, stats)."""
        region = self.region_of(gpu.node, node_labels)
        price = self.prices.price_per_gpu_hour(gpu.model, gpu.node)
        uuid = gpu.info.uuid
        for interval in applied.intervals:
            intensity = self.intensity_at(region, interval.start)
            usage, shares = account_interval(interval, price, self.carbon.pue, intensity)
            hour = math.floor(interval.start / HOUR_SECONDS) * HOUR_SECONDS
            _add(write.gpu_usage, (hour, uuid), usage)
            for ref, part in shares.items():
                _add(write.workload_usage, (hour, ref.key), part)
                write.workloads[ref.key] = ref
                self._observe(ref.key, uuid, gpu.model, interval, write)
        write.episodes_closed.extend(applied.episodes_closed)

    def _observe(
        self, key: str, gpu_uuid: str, model: str, interval: Interval, write: LedgerWrite
    ) -> None:
        """Right-sizing statistics: memory and SM activity per GPU the workload holds."""
        held = self._workload_gpus.setdefault(key, set())
        held.add(gpu_uuid)
        stats = write.workload_stats.setdefault(key, WorkloadStatsDelta())
        stats.observe(interval.seconds, interval.memory_used_bytes, interval.sm_activity)
        stats.gpu_model = model
        self._workload_models[key] = model
        stats.gpu_count = len(held)
        stats.last_seen = max(stats.last_seen, interval.end)

    def workload_models(self) -> dict[str, str]:
        """Workload key -> GPU model it was last seen on."""
        return dict(self._workload_models)

    def gpu_record(self, gpu: TrackedGpu) -> GpuRecord:
        import msgspec

        last_seen = gpu.last.timestamp if gpu.last is not None else 0.0
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


def _add(target: dict[tuple[float, str], Usage], key: tuple[float, str], usage: Usage) -> None:
    existing = target.get(key)
    if existing is None:
        target[key] = usage
    else:
        existing.add(usage)
