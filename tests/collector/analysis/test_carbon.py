"""Carbon arithmetic, the shipped intensity table against its sources, and the hourly feed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.analysis.carbon import (
    DEFAULT_TABLE,
    CarbonContext,
    HourlyFeed,
    IntensityTable,
    UnknownRegionError,
    carbon_grams,
)
from tests.paths import FIXTURES

# verbatim copies of ../shared/reference/carbon (CodeCarbon's data; attribution in SOURCE.md)
REFERENCE = FIXTURES / "reference" / "carbon"


def test_carbon_of_one_kwh() -> None:
    assert carbon_grams(3.6e6, 1.2, 400.0) == pytest.approx(480.0)
    assert CarbonContext(1.5, 100.0, {"n2": 10.0}).kg_for_kwh(2.0, "n2") == pytest.approx(0.03)


@given(st.floats(0, 1e15), st.floats(0, 1e15), st.floats(1, 3), st.floats(0, 2000))
def test_carbon_is_linear_in_energy_and_nonnegative(
    a: float, b: float, pue: float, intensity: float
) -> None:
    total = carbon_grams(a + b, pue, intensity)
    assert total >= 0
    assert total == pytest.approx(carbon_grams(a, pue, intensity) + carbon_grams(b, pue, intensity))
    assert total == pytest.approx((a + b) / 3.6e6 * pue * intensity)


def reference(name: str) -> dict[str, dict[str, object]]:
    path = REFERENCE / name
    data: dict[str, dict[str, object]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_every_country_matches_codecarbon() -> None:
    table = IntensityTable.default()
    countries = reference("global_energy_mix.json")
    assert len(countries) == 213
    for iso3, entry in countries.items():
        assert table.intensity_g_per_kwh(iso3) == entry["carbon_intensity"], iso3


def test_us_states_are_converted_from_lbs_per_mwh() -> None:
    table = IntensityTable.default()
    for name, entry in reference("usa_emissions.json").items():
        if name.startswith("_"):
            continue
        expected = float(str(entry["emissions"])) * 0.45359237
        assert table.intensity_g_per_kwh(f"US-{entry['regionCode']}") == pytest.approx(
            expected, abs=1e-3)  # fmt: skip


def test_aliases_case_and_world() -> None:
    table = IntensityTable.default()
    assert table.intensity_g_per_kwh("DE") == table.intensity_g_per_kwh("deu") == 380.95
    assert table.intensity_g_per_kwh("germany") == 380.95
    assert table.intensity_g_per_kwh("california") == table.intensity_g_per_kwh("US-CA")
    assert table.intensity_g_per_kwh("world") == 475.0
    assert table.intensity_g_per_kwh("SE1") == 18.0
    assert table.intensity_g_per_kwh("gcp:europe-north1") == 46.0
    assert table.intensity_g_per_kwh("georgia") == table.intensity_g_per_kwh("GEO")  # the country
    assert 0 < table.intensity_g_per_kwh("CA-QC") < table.intensity_g_per_kwh("CA-AB")


def test_unknown_region_names_it_and_similar_ones() -> None:
    with pytest.raises(UnknownRegionError) as err:
        IntensityTable.default().intensity_g_per_kwh("Germny")
    assert err.value.region == "Germny"
    assert "germany" in err.value.similar
    assert isinstance(err.value, KeyError) and "Germny" in str(err.value)


def test_attribution_is_shipped() -> None:
    text = IntensityTable.default().attribution
    assert "CodeCarbon" in text and "MIT" in text and "CC BY 4.0" in text


def test_committed_table_is_what_the_build_script_makes() -> None:
    from scripts.build_carbon_table import build

    assert build(REFERENCE) == DEFAULT_TABLE.read_text(encoding="utf-8")


def test_load_custom_table(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("# my grid\nregion,aliases,intensity_g_per_kwh,year,source\n"
                    "site-a,lab|hq,123.5,2025,meter\n", encoding="utf-8")  # fmt: skip
    table = IntensityTable.load(path)
    assert table.intensity_g_per_kwh("HQ") == 123.5
    assert table.attribution == "my grid"
    assert table.regions() == ["site-a"]


HOUR = 3600.0
T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def write_feed(tmp_path: Path, history: list[dict[str, object]], zone: str = "DE") -> Path:
    path = tmp_path / "feed.json"
    path.write_text(json.dumps({"zone": zone, "history": history}), encoding="utf-8")
    return path


def test_hourly_feed_inside_and_outside_its_range(tmp_path: Path) -> None:
    path = write_feed(tmp_path, [
        {"carbonIntensity": 300, "datetime": "2026-01-01T00:00:00.000Z", "isEstimated": False},
        {"carbonIntensity": 200, "datetime": "2026-01-01T01:00:00.000Z"},
        {"carbonIntensity": None, "datetime": "2026-01-01T02:00:00.000Z"},
    ])  # fmt: skip
    feed = HourlyFeed.load(path, IntensityTable.default())
    assert feed.zone == "DE"
    assert feed.intensity_g_per_kwh(T0) == 300
    assert feed.intensity_g_per_kwh(T0 + HOUR - 1) == 300
    assert feed.intensity_g_per_kwh(T0 + HOUR + 10) == 200
    assert feed.intensity_g_per_kwh(T0 + 2 * HOUR + 10) == 380.95  # null: the table
    assert feed.intensity_g_per_kwh(T0 - 1) == 380.95
    assert feed.intensity_g_per_kwh(T0 + 10 * HOUR) == 380.95


def test_hourly_feed_with_unknown_zone_needs_a_fallback(tmp_path: Path) -> None:
    path = write_feed(tmp_path, [{"carbonIntensity": 1, "datetime": "2026-01-01T00:00:00Z"}],
                      zone="XX-NOWHERE")  # fmt: skip
    with pytest.raises(UnknownRegionError):
        HourlyFeed.load(path, IntensityTable.default())
    feed = HourlyFeed.load(path, IntensityTable.default(), fallback_region="world")
    assert feed.intensity_g_per_kwh(T0 - HOUR) == 475.0
