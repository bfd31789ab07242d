"""Pricing-plan advice through ``evaluate``: a reserved baseline per pool, today's mix as
the reference, hysteresis, too little data, per-node plans. Curves are hand-made
(pricing_curves.py); each expected figure is computed in the docstring."""

from __future__ import annotations

import dataclasses

import pytest

from collector.analysis.carbon import CarbonContext
from collector.analysis.cost import PriceBook
from collector.config import AnalysisSettings
from collector.recommend.lifecycle import RecommendPolicy, evaluate
from collector.records import ModelHour, ModelUsage, Recommendation, RecommendationKind
from tests.collector.recommend.pricing_curves import NOW, pool

SETTINGS = AnalysisSettings()
CARBON = CarbonContext(pue=1.2, intensity_g_per_kwh=400.0)
POLICY = RecommendPolicy.default()
OD, RES = 6.88, 4.27  # the example book's H100 (break-even 0.62)


def book(**h100: object) -> PriceBook:
    entry = {"on_demand_per_gpu_hour": 10.0, "reserved_per_gpu_hour": 6.0, **h100}
    return PriceBook.from_mapping({"currency": "USD", "models": {"H100": entry}})


def run(
    usage: tuple[list[ModelUsage], list[ModelHour]],
    prices: PriceBook,
    standing: list[Recommendation] | None = None,
    settings: AnalysisSettings = SETTINGS,
) -> list[Recommendation]:
    models, hours = usage
    recs = evaluate([], [], models, prices, CARBON, settings, NOW, POLICY, hours=hours,
                    standing=standing or [])  # fmt: skip
    return [r for r in recs if r.kind is RecommendationKind.PRICING_PLAN]


def test_reserve_the_baseline_keep_the_peak_on_demand() -> None:
    """10 H100, 12 h a day at 8 allocated and 12 h at 4: f_1..4 = 1, f_5..8 = 0.5,
    f_9, f_10 = 0; break-even 4.27 / 6.88 = 0.62 -> reserve 4, keep 6 on demand. Per hour
    today (all on demand, mean 6 allocated) 6 x 6.88; recommended 4 x 4.27 + 6.88 x 2
    (the peak above 4, averaged): saving 4 x 6.88 - 4 x 4.27 = 10.44/h."""
    [rec] = run(pool([8.0] * 12 + [4.0] * 12, 10), PriceBook.example())
    assert rec.title.startswith("Reserve 4 of 10 H100 on a 1-year plan, keep 6 on demand")
    assert rec.savings.money_per_hour == pytest.approx(4 * (OD - RES))
    assert rec.evidence["recommended"] == {"plan": "1y", "gpus": 4}
    assert rec.evidence["use_fractions"] == [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0, 0]
    risk = rec.evidence["risk"]
    assert isinstance(risk, dict)
    # usage 20 % lower: 6.4 and 3.2 allocated. Per hour today 6.88 x 4.8; the mix
    # 4 x 4.27 + 6.88 x 1.2 (2.4 above the 4 reserved, half the time): 6.88 x 3.6 - 17.08
    assert risk["saving_per_month"] == pytest.approx((6.88 * 3.6 - 4 * RES) * 730)


def test_no_advice_on_less_than_a_week_of_data() -> None:
    """Six days of a fully allocated pool: worth reserving, but under the 7-day minimum."""
    assert run(pool([8.0], 8, hours=6 * 24), PriceBook.example()) == []
    assert len(run(pool([8.0], 8, hours=7 * 24), PriceBook.example())) == 1


def test_a_reserved_fleet_keeps_only_its_baseline() -> None:
    """Today all 8 on the 1-year plan (6/h, on demand 10/h); 3 allocated all month:
    reserve 3, keep 5 on demand: 8 x 6 - 3 x 6 = 30/h saved. With 0.5 allocated
    (f_1 = 0.5 < 0.6) nothing is worth reserving: 8 x 6 - 10 x 0.5 = 43/h."""
    reserved = book(current_plan="reserved")
    [rec] = run(pool([3.0], 8), reserved)
    assert rec.title.startswith("Reserve 3 of 8 H100 on a 1-year plan, keep 5 on demand")
    assert rec.savings.money_per_hour == pytest.approx(30)
    [rec] = run(pool([0.5], 8), reserved)
    assert rec.title.startswith("Keep all 8 H100 on demand")
    assert rec.savings.money_per_hour == pytest.approx(43)


def test_hysteresis_around_todays_count() -> None:
    """Today 3 of 8 reserved (current: {plan: 1y, gpus: 3}), break-even 0.6, margin 0.1.
    The 4th GPU in use 13 of 20 h (0.65): within the margin, today's 3 stands: no advice.
    At 15 of 20 h (0.75 > 0.7): reserve 4, saving 10 x 0.75 - 6 = 1.5/h."""
    prices = book(current={"plan": "1y", "gpus": 3})
    assert run(pool([4.0] * 13 + [3.0] * 7, 8), prices) == []
    [rec] = run(pool([4.0] * 15 + [3.0] * 5, 8), prices)
    assert rec.evidence["recommended"] == {"plan": "1y", "gpus": 4}
    assert rec.savings.money_per_hour == pytest.approx(1.5)


def test_a_standing_recommendation_does_not_flap() -> None:
    """Today all on demand; standing advice: reserve 4 (the 4th GPU was in use 0.75 of
    the hours). It falls to 0.55 (11 of 20 h): below the break-even 0.6, so afresh the
    optimum is 3, but within the margin 0.1 the standing 4 stays. At 0.45 it moves to 3.
    Saving of the 4 at 0.55: today 10 x (3 + 0.55) = 35.5/h, reserved 4 x 6 = 24: 11.5/h."""
    prices = book()
    [standing] = run(pool([4.0] * 15 + [3.0] * 5, 8), prices)
    assert standing.evidence["recommended"] == {"plan": "1y", "gpus": 4}
    falling = pool([4.0] * 11 + [3.0] * 9, 8)
    [afresh] = run(falling, prices)
    assert afresh.evidence["recommended"] == {"plan": "1y", "gpus": 3}
    [rec] = run(falling, prices, [standing])
    assert rec.evidence["recommended"] == {"plan": "1y", "gpus": 4}
    assert rec.savings.money_per_hour == pytest.approx(11.5)
    [rec] = run(pool([4.0] * 9 + [3.0] * 11, 8), prices, [standing])
    assert rec.evidence["recommended"] == {"plan": "1y", "gpus": 3}


def test_each_node_is_judged_at_its_own_plan() -> None:
    """n1 pays the book (on demand), n2's override has it reserved (all 8); each has 3.2
    of 8 allocated all month: f_1..3 = 1, f_4 = 0.2 -> reserve 3 in both. n1 saves
    6.88 x 3.2 - (3 x 4.27 + 6.88 x 0.2) = 7.83/h; n2 8 x 4.27 - 14.186 = 19.974/h."""
    prices = PriceBook.from_mapping({
        "currency": "USD",
        "models": {"H100": {"on_demand_per_gpu_hour": OD, "reserved_per_gpu_hour": RES}},
        "node_overrides": {"n2": {"H100": {"current_plan": "reserved"}}},
    })  # fmt: skip
    n1, n2 = pool([3.2], 8, node="n1"), pool([3.2], 8, node="n2")
    recs = run((n1[0] + n2[0], n1[1] + n2[1]), prices)
    by_subject = {r.subject: r for r in recs}
    assert set(by_subject) == {"model:H100", "model:H100@n2"}
    mix = 3 * RES + OD * 0.2
    assert by_subject["model:H100"].savings.money_per_hour == pytest.approx(OD * 3.2 - mix)
    assert by_subject["model:H100@n2"].savings.money_per_hour == pytest.approx(8 * RES - mix)


def test_an_on_prem_box_is_never_priced_on_demand() -> None:
    """On-prem: 'on demand' 2.10 = 'reserved' 2.10: no commitment is cheaper, no advice
    (not "rent your own box by the hour")."""
    prices = book(on_demand_per_gpu_hour=2.1, reserved_per_gpu_hour=2.1, current_plan="1y")
    assert run(pool([0.5], 8), prices) == []


def test_three_year_plans_are_recommended_only_within_the_term_cap() -> None:
    """A 3-year plan at 4/h beside the 1-year at 6/h; all 8 allocated all month. The
    default cap (12 months) leaves the 3-year plan to the report: reserve 8 on 1y,
    80 - 48 = 32/h. With a 36-month cap: 8 on 3y, 80 - 32 = 48/h."""
    prices = book(plans={"3y": {"per_gpu_hour": 4.0, "upfront_share": 0.5}})
    [rec] = run(pool([8.0], 8), prices)
    assert rec.evidence["recommended"] == {"plan": "1y", "gpus": 8}
    assert rec.savings.money_per_hour == pytest.approx(32)
    longer = dataclasses.replace(SETTINGS, pricing_max_term_months=36)
    [rec] = run(pool([8.0], 8), prices, settings=longer)
    assert "3-year plan" in rec.title and rec.savings.money_per_hour == pytest.approx(48)


def test_hysteresis_is_judged_at_the_cheapest_plan() -> None:
    """Monthly 7/h and 1-year 5/h (break-evens 0.7 and 0.5); today 2 of 4 on the 1-year
    plan; both GPUs in use 0.45 of the hours (9 of 20 h at 2, else 0): below 0.5 but within
    the margin, so the 2 stand: no advice (judged at the monthly plan's 0.7 they would go)."""
    prices = book(plans={"monthly": 7.0, "1y": 5.0}, reserved_per_gpu_hour=5.0,
                  current={"plan": "1y", "gpus": 2})  # fmt: skip
    assert run(pool([2.0] * 9 + [0.0] * 11, 4), prices) == []
    [rec] = run(pool([2.0] * 7 + [0.0] * 13, 4), prices)  # 0.35: below the margin
    assert rec.title.startswith("Keep all 4 H100 on demand")
