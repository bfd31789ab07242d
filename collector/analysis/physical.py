"""What a GPU can physically do: the bounds past which a reading is not a measurement.

A reading of 1e12 W, or an energy counter that jumps 1e15 J in a second, is well typed
and finite, yet no board draws it: taken as measured it would become petajoules of a
workload's energy and carbon, summed into every total. The bound is a GPU's rating
(its model's TDP from the GPU catalogue, or the power limit the agent reported, the
larger where both are known) times ``POWER_MARGIN``: boards briefly draw past their
limit, never several times it. A GPU whose rating is unknown is held to
``UNRATED_MAX_WATTS``.

The edge refuses a sample whose ``power_watts`` is past its GPU's bound
(collector/ingest/problems.py); an energy-counter delta past the bound over the interval
(plus ``ENERGY_SLACK_SECONDS``) is not taken as measured (analysis/energy.py's
``interval_energy``): that interval falls back to the power-integrated estimate.
"""

from __future__ import annotations

#: a GPU draws at most this multiple of its rating (TDP or enforced power limit)
POWER_MARGIN = 3.0
#: no GPU board is rated above this (a GB200 superchip is 2,700 W); a GPU whose rating is
#: unknown (no catalogue entry, no power limit) is held to it
UNRATED_MAX_WATTS = 5000.0
#: the largest power any GPU may report: its rating can be at most UNRATED_MAX_WATTS
MAX_POWER_WATTS = POWER_MARGIN * UNRATED_MAX_WATTS
#: an energy counter may run this many seconds of full power ahead of the interval it
#: spans: the agent reads the counter and stamps the sample at slightly different times
ENERGY_SLACK_SECONDS = 1.0
#: the temperatures a GPU reports at all (its die or its memory), degC
MIN_CELSIUS = -50.0
MAX_CELSIUS = 150.0


def max_power_watts(tdp_watts: float | None, power_limit_watts: float | None) -> float:
    """The most a GPU rated ``tdp_watts`` (its model's, None: not in the catalogue) with
    ``power_limit_watts`` (as the agent reported it, None: unknown) may draw."""
    rating = max(tdp_watts or 0.0, power_limit_watts or 0.0)
    return POWER_MARGIN * rating if rating > 0 else UNRATED_MAX_WATTS
