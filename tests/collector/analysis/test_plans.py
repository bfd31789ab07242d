"""The reserved-baseline rule on hand-made allocation curves, each against a hand
computation in its docstring. Prices throughout: on demand 10/h, the 1-year plan 6/h
(break-even 0.6), unless a test says otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.analysis.plans import (
    ALL_ON_DEMAND,
    GroupPrices,
    Mix,
    best_mix,
    mix_cost,
    sticky_count,
    use_fractions,
    what_if,
)
from collector.analysis.price_plans import PlanPrice

OD = 10.0
ONE_YEAR = PlanPrice("1y", 6.0, 12)
PRICES = GroupPrices(OD, (ONE_YEAR,), {"on_demand": OD, "1y": 6.0}, ALL_ON_DEMAND)


def test_flat() -> None:
    """d = 5 for 24 h on 8 GPUs: f_1..f_5 = 1, f_6..f_8 = 0 -> reserve 5.
    recommended 5 x 6 x 24 = 720; all on demand 10 x 5 x 24 = 1200;
    all reserved 8 x 6 x 24 = 1152."""
    plans = what_if([5.0] * 24, [5.0] * 24, 8, PRICES)
    assert plans.fractions == (1, 1, 1, 1, 1, 0, 0, 0)
    assert plans.recommended == Mix("1y", 5)
    assert plans.costs.recommended == pytest.approx(720)
    assert plans.costs.all_on_demand == pytest.approx(1200)
    assert plans.costs.all_reserved == pytest.approx(1152)
    assert plans.costs.today == pytest.approx(1200)  # today: all on demand


def test_diurnal() -> None:
    """12 h at d = 6, 12 h at d = 2 on 6 GPUs: f_1 = f_2 = 1, f_3..f_6 = 0.5 < 0.6 ->
    reserve 2. recommended 2 x 6 x 24 + 10 x (12 x 4) = 288 + 480 = 768;
    all on demand 10 x (72 + 24) = 960; all reserved 6 x 6 x 24 = 864."""
    curve = [6.0] * 12 + [2.0] * 12
    plans = what_if(curve, curve, 6, PRICES)
    assert plans.fractions == (1, 1, 0.5, 0.5, 0.5, 0.5)
    assert plans.recommended == Mix("1y", 2)
    assert (plans.costs.recommended, plans.costs.all_on_demand, plans.costs.all_reserved) == (
        pytest.approx(768), pytest.approx(960), pytest.approx(864),
    )  # fmt: skip
    assert plans.saving == pytest.approx(960 - 768)


def test_bursty() -> None:
    """d = 10 for 2 of 24 h, 1 the rest, 10 GPUs: f_1 = 1, f_2..f_10 = 2/24 -> reserve 1.
    recommended 6 x 24 + 10 x (2 x 9) = 144 + 180 = 324; all on demand
    10 x (20 + 22) = 420; all reserved 10 x 6 x 24 = 1440 (worst by far)."""
    curve = [10.0] * 2 + [1.0] * 22
    plans = what_if(curve, curve, 10, PRICES)
    assert plans.fractions[0] == 1 and plans.fractions[1:] == pytest.approx([2 / 24] * 9)
    assert plans.recommended == Mix("1y", 1)
    assert plans.costs.recommended == pytest.approx(324)
    assert plans.costs.all_on_demand == pytest.approx(420)
    assert plans.costs.all_reserved == pytest.approx(1440)


def test_growing_and_its_risk() -> None:
    """d_h = h + 0.5 for h = 0..9 on 10 GPUs: the k-th GPU is fully used for h >= k and
    half in hour k-1, f_k = (10.5 - k) / 10: .95 .85 .75 .65 .55 ... -> reserve 4.
    recommended 4 x 6 x 10 + 10 x (0.5 + 1.5 + ... + 5.5) = 240 + 180 = 420;
    all on demand 10 x 50 = 500. Usage 20 % lower (d = 0.8 (h + 0.5)): the 4 reserved
    cost 240 + 10 x (0.4 + 1.2 + 2.0 + 2.8 + 3.6) = 340, on demand 10 x 40 = 400: the
    saving shrinks from 80 to 60."""
    curve = [h + 0.5 for h in range(10)]
    plans = what_if(curve, curve, 10, PRICES)
    assert plans.fractions == pytest.approx([(10.5 - k) / 10 for k in range(1, 11)])
    assert plans.recommended == Mix("1y", 4)
    assert plans.costs.recommended == pytest.approx(420)
    assert plans.saving == pytest.approx(80)
    assert plans.saving_if_usage_drops == pytest.approx(60)


def test_idle_hours_removed_shrink_the_baseline() -> None:
    """Allocated d = 4 all day on 4 GPUs, but active only 2 of them: with idle GPUs
    released the curve is d = 2 and the optimum reserves 2: 2 x 6 x 24 = 288, against
    4 x 6 x 24 = 576 reserving what is allocated."""
    plans = what_if([4.0] * 24, [2.0] * 24, 4, PRICES)
    assert plans.recommended == Mix("1y", 4) and plans.costs.recommended == pytest.approx(576)
    assert plans.busy.recommended == pytest.approx(288)


def test_today_reserved_counts_are_paid_every_hour() -> None:
    """Today 3 GPUs on the 1-year plan, d = 1 all day: 3 x 6 x 24 = 432 today; the
    optimum reserves 1: 144."""
    today = GroupPrices(OD, (ONE_YEAR,), {"on_demand": OD, "1y": 6.0}, Mix("1y", 3))
    plans = what_if([1.0] * 24, [1.0] * 24, 4, today)
    assert plans.costs.today == pytest.approx(432)
    assert plans.costs.recommended == pytest.approx(144)


def test_the_cheapest_commitment_takes_every_gpu_it_wins() -> None:
    """A 3-year plan at 4/h (break-even 0.4) beside the 1-year at 6/h: on the diurnal
    curve (f = 1, 1, .5, .5) every GPU beats 0.4, so all 4 go on the 3-year plan."""
    three = PlanPrice("3y", 4.0, 36)
    fractions = use_fractions([4.0] * 12 + [2.0] * 12, 4)
    assert best_mix(fractions, (ONE_YEAR, three), OD) == Mix("3y", 4)
    assert best_mix(fractions, (), OD) == ALL_ON_DEMAND


def test_hysteresis_keeps_the_count_near_the_break_even() -> None:
    """f = 1, .9, .65, .55 at break-even 0.6 with margin 0.1: the exact count is 3.
    Held at 2 or 3 or 4 it stands (up = 2: f > .7; down = 4: f > .5); held at 1 it moves
    to the exact 3 (1 < up)."""
    fractions = [1.0, 0.9, 0.65, 0.55]
    assert [sticky_count(fractions, 0.6, held, 0.1) for held in (1, 2, 3, 4)] == [3, 2, 3, 4]


@given(
    st.lists(st.floats(0, 12, allow_nan=False), min_size=1, max_size=48),
    st.floats(0.5, 9.5),
)
def test_the_per_gpu_rule_is_the_brute_force_optimum(curve: list[float], price: float) -> None:
    """Over every k from 0 to the GPU count, the rule's mix costs the least."""
    plan = PlanPrice("1y", price, 12)
    mix = best_mix(use_fractions(curve, 12), (plan,), OD)
    chosen = mix_cost(curve, mix, price, OD)
    brute = min(mix_cost(curve, Mix("1y", k), price, OD) for k in range(13))
    assert chosen == pytest.approx(brute, rel=1e-9, abs=1e-9)
