"""The prices and carbon rates in force: one object that accounting, reports and
recommendations share.

A GPU's price per hour comes from the price book (per model, with node overrides); a
node's grid intensity from its region (its ``region`` label, else ``carbon.node_regions``,
else the default region) in the shipped yearly table, or from the hourly feed for the
default region when one is configured.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping

from agent.model import GpuInfo
from collector.analysis.carbon import CarbonContext, HourlyFeed, IntensityTable, UnknownRegionError
from collector.analysis.cost import PriceBook, canonical_model
from collector.analysis.gpu_models import GpuCatalogue
from collector.analysis.mig_price import slice_fraction
from collector.analysis.physical import max_power_watts
from collector.config import CarbonSettings
from collector.records import GpuView

log = logging.getLogger(__name__)

#: GPU kinds (name, power limit) whose power bound is kept; a fleet has a few dozen
_MAX_POWER_KEPT = 1024


class Rates:
    """Prices per GPU-hour and grid intensity per region and time; thread-safe."""

    def __init__(
        self,
        prices: PriceBook,
        intensity: IntensityTable,
        carbon: CarbonSettings,
        feed: HourlyFeed | None = None,
        catalogue: GpuCatalogue | None = None,
    ) -> None:
        self.prices = prices
        #: MIG profiles: what share of its parent's price a slice costs
        self.catalogue = catalogue if catalogue is not None else GpuCatalogue.default()
        self.intensity = intensity
        self.carbon = carbon
        self.feed = feed
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        #: region -> gCO2e/kWh from the yearly table (it does not vary with time)
        self._table_intensity: dict[str, float] = {}
        #: (GPU name, power limit) -> the most it can draw
        self._max_power: dict[tuple[str, float | None], float] = {}

    @property
    def currency(self) -> str:
        return self.prices.currency

    @property
    def pue(self) -> float:
        return self.carbon.pue

    def model_of(self, info: GpuInfo) -> str:
        """The price book's model key for a GPU (``NVIDIA H100 80GB HBM3`` -> ``H100``)."""
        return canonical_model(info.name)

    def max_power_watts(self, info: GpuInfo) -> float:
        """The most a GPU can draw (analysis/physical.py): its model's TDP from the
        catalogue and its reported power limit; kept per (name, limit), a bounded few."""
        key = (info.name, info.power_limit_watts)
        watts = self._max_power.get(key)
        if watts is None:
            model = self.catalogue.get(info.name)
            tdp = model.tdp_watts if model is not None else None
            watts = max_power_watts(tdp, info.power_limit_watts)
            with self._lock:
                if len(self._max_power) >= _MAX_POWER_KEPT:
                    self._max_power.clear()
                self._max_power[key] = watts
        return watts

    def price_per_gpu_hour(self, model: str, node: str) -> float:
        return self.prices.price_per_gpu_hour(model, node)

    def slice_fraction(self, info: GpuInfo) -> float:
        """The share of its parent's price a MIG slice costs (the price book's
        ``mig_price_basis``); 1.0 for anything that is not a slice."""
        if info.mig_parent_uuid is None or info.mig_profile is None:
            return 1.0
        parent = self.catalogue.get(info.name)
        basis = self.prices.mig_price_basis
        return slice_fraction(parent, info.mig_profile, info.memory_total_bytes, basis)

    def view_price_per_hour(self, view: GpuView) -> float:
        """What a GPU or MIG slice in the fleet view costs per hour: its model's price
        on its node times its share (``GpuView.price_fraction``)."""
        return self.prices.price_per_gpu_hour(view.model, view.node) * view.price_fraction

    def region_of(self, node: str, node_labels: Mapping[str, str]) -> str:
        return node_labels.get("region") or self.carbon.node_regions.get(node) or self.carbon.region

    def varies_hourly(self, region: str) -> bool:
        """Whether ``region``'s intensity can change within an hour (the hourly feed)."""
        return self.feed is not None and region == self.carbon.region

    def intensity_at(self, region: str, ts: float) -> float:
        """gCO2e/kWh (before PUE) for ``region`` at ``ts``; an unknown region falls back to
        the default region (logged once), never fails accounting."""
        if self.feed is not None and region == self.carbon.region:
            return self.feed.intensity_g_per_kwh(ts)
        cached = self._table_intensity.get(region)
        if cached is None:
            cached = self._table_value(region, ts)
            with self._lock:
                self._table_intensity[region] = cached
        return cached

    def regions_of(
        self, nodes: Iterable[str], node_labels: Mapping[str, Mapping[str, str]]
    ) -> dict[str, str]:
        """Node -> the region it is in (``node_labels``: each node's latest labels)."""
        return {node: self.region_of(node, node_labels.get(node, {})) for node in nodes}

    def node_intensities(
        self, nodes: Iterable[str], node_labels: Mapping[str, Mapping[str, str]], now: float
    ) -> dict[str, float]:
        """Node -> grid intensity at ``now`` of the region it is in."""
        regions = self.regions_of(nodes, node_labels)
        return {node: self.intensity_at(region, now) for node, region in regions.items()}

    def region_intensities(
        self, nodes: Iterable[str], node_labels: Mapping[str, Mapping[str, str]], now: float
    ) -> dict[str, float]:
        """Region -> grid intensity at ``now``, for each region ``nodes`` are in."""
        regions = sorted(set(self.regions_of(nodes, node_labels).values()))
        return {region: self.intensity_at(region, now) for region in regions}

    def carbon_context(
        self, node_labels: Mapping[str, Mapping[str, str]], now: float
    ) -> CarbonContext:
        """PUE and intensities at ``now``: the default region's and each known node's."""
        default = self.intensity_at(self.carbon.region, now)
        per_node = self.node_intensities(node_labels, node_labels, now)
        return CarbonContext(self.pue, default, per_node)

    def _table_value(self, region: str, ts: float) -> float:
        try:
            return self.intensity.intensity_g_per_kwh(region, ts)
        except UnknownRegionError as err:
            with self._lock:
                first = region not in self._warned
                self._warned.add(region)
            if first:
                log.warning("%s; using region %r", err, self.carbon.region)
            return self.intensity.intensity_g_per_kwh(self.carbon.region, ts)
