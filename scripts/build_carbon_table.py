"""Build collector/data/carbon_intensity.csv from CodeCarbon's data files.

Usage: python scripts/build_carbon_table.py [REFERENCE_DIR] [OUTPUT_CSV]
(defaults: ../shared/reference/carbon and collector/data/carbon_intensity.csv).

Rows (region, aliases, intensity_g_per_kwh, year, source):
- ``world``: CodeCarbon's world average (IEA 2019), the fallback a deployment may choose;
- ISO-3166 alpha-3 countries from ``global_energy_mix.json`` (OWID ``carbon_intensity``),
  aliased by lower-case name and, for the countries in ISO2 below, the alpha-2 code;
- US states as ``US-XX`` from ``usa_emissions.json`` (lbs CO2/MWh x 0.45359237 = g/kWh);
- Canadian provinces as ``CA-XX``, intensity computed from the generation mix in
  ``canada_energy_mix.json`` with the per-source factors of
  ``carbon_intensity_per_source.json``. Biomass and "other" have no factor there: they are
  left out and the remaining shares renormalised (they are a few percent at most);
- Nordic bidding zones as ``SE-SE1`` ... ``NO-NO5`` (Electricity Maps zone names; alias
  ``SE1``) from ``nordic_emissions.json``;
- Google Cloud regions as ``gcp:<region>`` from ``impact.csv``.

The CSV starts with ``#`` lines carrying the attribution; IntensityTable keeps them.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

LBS_PER_MWH_TO_G_PER_KWH = 0.45359237

#: alpha-2 -> alpha-3 for the countries a GPU fleet is likely to sit in (aliases only).
ISO2 = {
    "AE": "ARE", "AR": "ARG", "AT": "AUT", "AU": "AUS", "BE": "BEL", "BR": "BRA",
    "CA": "CAN", "CH": "CHE", "CL": "CHL", "CN": "CHN", "CZ": "CZE", "DE": "DEU",
    "DK": "DNK", "EG": "EGY", "ES": "ESP", "FI": "FIN", "FR": "FRA", "GB": "GBR",
    "GR": "GRC", "HK": "HKG", "HU": "HUN", "ID": "IDN", "IE": "IRL", "IL": "ISR",
    "IN": "IND", "IS": "ISL", "IT": "ITA", "JP": "JPN", "KR": "KOR", "MX": "MEX",
    "MY": "MYS", "NL": "NLD", "NO": "NOR", "NZ": "NZL", "PH": "PHL", "PL": "POL",
    "PT": "PRT", "QA": "QAT", "RO": "ROU", "SA": "SAU", "SE": "SWE", "SG": "SGP",
    "TH": "THA", "TR": "TUR", "TW": "TWN", "UA": "UKR", "US": "USA", "VN": "VNM",
    "ZA": "ZAF",
}  # fmt: skip

CANADA = {
    "alberta": "AB", "british columbia": "BC", "manitoba": "MB", "new brunswick": "NB",
    "newfoundland and labrador": "NL", "northwest territories": "NT", "nova scotia": "NS",
    "nunavut": "NU", "ontario": "ON", "prince edward island": "PE", "quebec": "QC",
    "saskatchewan": "SK", "yukon": "YT",
}  # fmt: skip

#: canada_energy_mix.json key -> carbon_intensity_per_source.json key
CANADA_SOURCES = {
    "naturalGas": "natural_gas", "nuclear": "nuclear", "petroleum": "petroleum",
    "coal": "coal", "solar": "solar", "wind": "wind", "hydro": "hydroelectricity",
    "tidal": "hydroelectricity",
}  # fmt: skip

ATTRIBUTION = """\
Grid carbon intensity (gCO2e/kWh), built by scripts/build_carbon_table.py from CodeCarbon's
data files (github.com/mlco2/codecarbon, commit b05965e43b690cdc53787c7577adbe6e2caf4ed9,
MIT License: Copyright (c) 2019 Mila, BCG Gamma, CometML, Haverford College;
Copyright (c) 2023 Code Carbon NGO). Underlying sources: country intensities from
Our World in Data's energy dataset (Ember, Energy Institute), CC BY 4.0; US states from
US EPA eGRID; Canadian provinces computed from CodeCarbon's generation mix and per-source
factors (responsibleproblemsolving/energy-usage, World Nuclear Association); Nordic zones
from ENTSO-E based averages; Google Cloud regions from Google's region carbon data;
world average from IEA (2019). Yearly averages, not marginal or hourly values."""

Row = tuple[str, str, float, str, str]


def world_row(per_source: dict[str, object]) -> Row:
    return ("world", "global", float(str(per_source["world_average"])), "2019", "IEA")


def country_rows(mix: dict[str, dict[str, object]]) -> list[Row]:
    alpha2 = {v: k for k, v in ISO2.items()}
    rows = []
    for iso3, entry in sorted(mix.items()):
        aliases = [str(entry["country_name"]).lower()]
        if iso3 in alpha2:
            aliases.insert(0, alpha2[iso3])
        intensity = float(str(entry["carbon_intensity"]))
        rows.append((iso3, "|".join(aliases), intensity, str(entry["year"]), "OWID"))
    return rows


def us_rows(states: dict[str, dict[str, object]]) -> list[Row]:
    rows = []
    for name, entry in sorted(states.items()):
        if name.startswith("_"):  # "_unit" documents the file: lbs/MWh
            continue
        grams = float(str(entry["emissions"])) * LBS_PER_MWH_TO_G_PER_KWH
        rows.append((f"US-{entry['regionCode']}", name, round(grams, 3), "2016", "EPA eGRID"))
    return rows


def canada_rows(mixes: dict[str, dict[str, float]], per_source: dict[str, object]) -> list[Row]:
    rows = []
    for name, mix in sorted(mixes.items()):
        known = {k: v for k, v in mix.items() if k in CANADA_SOURCES}
        total = sum(known.values())
        grams = sum(v * float(str(per_source[CANADA_SOURCES[k]])) for k, v in known.items())
        code = CANADA[name]
        rows.append((f"CA-{code}", name, round(grams / total, 3), "2023", "CodeCarbon mix"))
    return rows


def nordic_rows(nordic: dict[str, dict[str, dict[str, object]]]) -> list[Row]:
    rows = []
    for zone, entry in sorted(nordic["data"].items()):
        if len(zone) < 3:  # "FI" is the whole country: FIN from OWID covers it
            continue
        grams = float(str(entry["emission_factor"]))
        rows.append((f"{zone[:2]}-{zone}", zone, grams, str(entry["year"]), "ENTSO-E"))
    return rows


def gcp_rows(impact_csv: str) -> list[Row]:
    reader = csv.DictReader(io.StringIO(impact_csv.lstrip("\ufeff")))
    rows = []
    for rec in reader:
        region = f"{rec['provider']}:{rec['region']}"
        rows.append((region, "", float(rec["impact"]), "", "Google Cloud"))
    return sorted(rows)


def drop_clashing_aliases(rows: list[Row]) -> list[Row]:
    """An alias names one region: the first row keeps it ("georgia" is the country)."""
    used = {row[0].lower() for row in rows}
    kept = []
    for region, aliases, grams, year, source in rows:
        mine = [a for a in aliases.split("|") if a and a.lower() not in used]
        used.update(a.lower() for a in mine)
        kept.append((region, "|".join(mine), grams, year, source))
    return kept


def build(reference: Path) -> str:
    def load(name: str) -> dict[str, object]:
        data: dict[str, object] = json.loads((reference / name).read_text(encoding="utf-8"))
        return data

    per_source = load("carbon_intensity_per_source.json")
    rows = [world_row(per_source)]
    rows += country_rows(load("global_energy_mix.json"))  # type: ignore[arg-type]
    rows += us_rows(load("usa_emissions.json"))  # type: ignore[arg-type]
    rows += canada_rows(load("canada_energy_mix.json"), per_source)  # type: ignore[arg-type]
    rows += nordic_rows(load("nordic_emissions.json"))  # type: ignore[arg-type]
    rows += gcp_rows((reference / "impact.csv").read_text(encoding="utf-8"))
    rows = drop_clashing_aliases(rows)
    out = io.StringIO()
    out.write("".join(f"# {line}\n" for line in ATTRIBUTION.splitlines()))
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["region", "aliases", "intensity_g_per_kwh", "year", "source"])
    writer.writerows(rows)
    return out.getvalue()


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[1]
    reference = Path(argv[1]) if len(argv) > 1 else root.parent / "shared/reference/carbon"
    output = Path(argv[2]) if len(argv) > 2 else root / "collector/data/carbon_intensity.csv"
    output.write_text(build(reference), encoding="utf-8")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
