"""Hypothesis invariants of the simulator: energy never decreases, idle <= elapsed."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.sources.simulated.source import DEFAULT_START_TIME, SimulatedNode

T0 = DEFAULT_START_TIME
NODE = SimulatedNode.build("inv", ["H100", "A100", "L4", "T4", "B200", "L40S", "H200", "H100"])
GPUS = [info.uuid for info in NODE.discover()]

offsets = st.lists(st.floats(min_value=-600.0, max_value=4 * 3600.0), min_size=2, max_size=12)


@settings(max_examples=60, deadline=None)
@given(offsets)
def test_energy_counter_never_decreases(times: list[float]) -> None:
    readings = [NODE.read(T0 + t) for t in sorted(times)]
    for before, after in itertools.pairwise(readings):
        for a, b in zip(before, after, strict=True):
            assert a.energy_joules is not None and b.energy_joules is not None
            assert b.energy_joules >= a.energy_joules


@settings(max_examples=60, deadline=None)
@given(
    st.floats(min_value=0.0, max_value=3 * 3600.0),
    st.floats(min_value=0.0, max_value=3600.0),
    st.floats(min_value=0.0, max_value=3600.0),
    st.sampled_from(GPUS),
)
def test_energy_is_additive_and_idle_fits_in_elapsed(
    start: float, first: float, second: float, gpu: str
) -> None:
    a, b, c = T0 + start, T0 + start + first, T0 + start + first + second
    whole = NODE.true_energy_joules(gpu, a, c)
    parts = NODE.true_energy_joules(gpu, a, b) + NODE.true_energy_joules(gpu, b, c)
    assert abs(whole - parts) <= 1e-6  # joules; E since epoch is ~1e7 J, ulp ~2e-9
    assert whole >= 0.0
    intervals = NODE.true_idle_intervals(gpu, a, c)
    idle = sum(y - x for x, y in intervals)
    assert 0.0 <= idle <= (c - a) + 1e-9
    assert all(a <= x < y <= c for x, y in intervals)
    assert all(p[1] < q[0] for p, q in itertools.pairwise(intervals))  # merged, disjoint
