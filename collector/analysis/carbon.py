"""Carbon: energy x PUE x grid intensity, with intensities from a shipped table or a feed.

The shipped table (``collector/data/carbon_intensity.csv``) is built from CodeCarbon's data
files by ``scripts/build_carbon_table.py``; its ``#`` header lines are the attribution and
``IntensityTable.attribution`` returns them, so whatever shows a figure can credit it.
"""

from __future__ import annotations

import bisect
import csv
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

JOULES_PER_KWH = 3.6e6
HOURLY_FEED_STEP_SECONDS = 3600.0
DEFAULT_TABLE = Path(__file__).parents[1] / "data" / "carbon_intensity.csv"


def carbon_grams(energy_joules: float, pue: float, intensity_g_per_kwh: float) -> float:
    """Grams CO2e for ``energy_joules`` of IT energy at a site with ``pue`` on a grid of
    ``intensity_g_per_kwh``: kWh x PUE x intensity."""
    return energy_joules / JOULES_PER_KWH * pue * intensity_g_per_kwh


@dataclass(frozen=True)
class CarbonContext:
    """What recommendations need to turn kWh into CO2e: the site PUE and a grid intensity
    (gCO2e/kWh), optionally per node (nodes in other regions)."""

    pue: float
    intensity_g_per_kwh: float
    node_intensity_g_per_kwh: Mapping[str, float] = field(default_factory=dict)

    def intensity_for(self, node: str) -> float:
        return self.node_intensity_g_per_kwh.get(node, self.intensity_g_per_kwh)

    def kg_for_kwh(self, energy_kwh: float, node: str = "") -> float:
        return energy_kwh * self.pue * self.intensity_for(node) / 1000.0


class UnknownRegionError(KeyError):
    """A region that is neither a region code nor an alias in the intensity table."""

    def __init__(self, region: str, similar: list[str]) -> None:
        hint = f"; similar: {', '.join(similar)}" if similar else ""
        super().__init__(f"unknown carbon region {region!r}{hint}")
        self.region = region
        self.similar = similar

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class IntensityRow:
    region: str
    intensity_g_per_kwh: float
    year: str
    source: str


class IntensityTable:
    """Yearly grid intensities by region: ISO-3 country codes (``DEU``), US states
    (``US-CA``), Canadian provinces (``CA-QC``), Nordic zones (``SE-SE1``), cloud regions
    (``gcp:europe-north1``) and ``world``; aliases (``DE``, ``germany``, ``california``)
    and case do not matter."""

    def __init__(self, rows: list[IntensityRow], aliases: dict[str, str], attribution: str):
        self._rows = {row.region.lower(): row for row in rows}
        self._aliases = {alias.lower(): region.lower() for alias, region in aliases.items()}
        self.attribution = attribution

    @classmethod
    def load(cls, path: Path) -> IntensityTable:
        """Read a table in the shipped CSV format; ``#`` lines are the attribution."""
        text = path.read_text(encoding="utf-8")
        comments = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("#")]
        body = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
        rows: list[IntensityRow] = []
        aliases: dict[str, str] = {}
        for rec in csv.DictReader(body):
            grams = float(rec["intensity_g_per_kwh"])
            if not grams >= 0:
                raise ValueError(f"{path}: negative intensity for {rec['region']!r}")
            rows.append(IntensityRow(rec["region"], grams, rec["year"], rec["source"]))
            for alias in filter(None, rec["aliases"].split("|")):
                aliases[alias] = rec["region"]
        return cls(rows, aliases, " ".join(comments))

    @classmethod
    def default(cls) -> IntensityTable:
        """The shipped table."""
        return cls.load(DEFAULT_TABLE)

    def regions(self) -> list[str]:
        return sorted(row.region for row in self._rows.values())

    def row(self, region: str) -> IntensityRow:
        """The row for a region code or alias; raises UnknownRegionError naming similar ones."""
        name = region.strip().lower()
        found = self._rows.get(self._aliases.get(name, name))
        if found is None:
            choices = [*self._rows, *self._aliases]
            similar = difflib.get_close_matches(name, choices, n=5, cutoff=0.6)
            raise UnknownRegionError(region, similar)
        return found

    def intensity_g_per_kwh(self, region: str, ts: float = 0.0) -> float:
        """gCO2e/kWh for ``region``; ``ts`` is accepted for symmetry with HourlyFeed (a
        yearly table does not vary within the year)."""
        return self.row(region).intensity_g_per_kwh


class HourlyFeed:
    """Hourly intensities in Electricity Maps' ``/carbon-intensity/history`` response
    format: ``{"zone": "DE", "history": [{"carbonIntensity": 312, "datetime":
    "2026-01-01T00:00:00.000Z", ...}, ...]}``. Each value holds for one hour from its
    ``datetime``; outside the covered hours (or where ``carbonIntensity`` is null) the
    table's value for ``fallback_region`` (default: the feed's zone) is used."""

    def __init__(
        self, zone: str, points: list[tuple[float, float]], table: IntensityTable, region: str
    ):
        self.zone = zone
        self._starts = [start for start, _ in points]
        self._values = [value for _, value in points]
        self._table = table
        self._region = region

    @classmethod
    def load(
        cls, path: Path, table: IntensityTable, fallback_region: str | None = None
    ) -> HourlyFeed:
        data = json.loads(path.read_text(encoding="utf-8"))
        zone = str(data.get("zone", ""))
        points = []
        for entry in data["history"]:
            value = entry.get("carbonIntensity")
            if value is None:
                continue
            if not float(value) >= 0:
                raise ValueError(f"{path}: negative carbonIntensity at {entry['datetime']}")
            points.append((parse_iso_seconds(entry["datetime"]), float(value)))
        points.sort()
        region = fallback_region or zone
        table.row(region)  # fail now, naming the region, rather than at the first miss
        return cls(zone, points, table, region)

    def intensity_g_per_kwh(self, ts: float) -> float:
        i = bisect.bisect_right(self._starts, ts) - 1
        if i >= 0 and ts < self._starts[i] + HOURLY_FEED_STEP_SECONDS:
            return self._values[i]
        return self._table.intensity_g_per_kwh(self._region, ts)


def parse_iso_seconds(text: str) -> float:
    """Unix seconds from an ISO-8601 timestamp (``Z`` or an offset; naive means UTC)."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
