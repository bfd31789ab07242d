"""A GPU's health as the fleet tiles show it: the facts of its newest sample (temperatures,
throttle reasons, uncorrected ECC, remapped rows pending) and the XIDs of the last minutes.

Kept per GPU, not per reading (a GPU holds ~45 readings, collector/fleet/readings.py).
``health_of`` runs once per batch and GPU on the batch's newest sample: it hands back the
GPU's present ``GpuHealth`` when no fact moved (a GPU that reports none costs a few
comparisons) and builds a new one, its problems decided once, when one did. XIDs are kept
as each code's last sighting (node clock): only a sample with XIDs touches them, and the
codes a GPU can report bound their number.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.model import THROTTLE_REASONS, GpuSample
from collector.analysis.verdicts import HARDWARE_XIDS, THROTTLE_MASK
from collector.records import GpuHealth, HealthProblem, XidSeen

#: a GPU die at or above this is hot (data-centre GPUs slow down from ~87-90 degC)
HOT_CELSIUS = 85.0
#: a GPU's HBM at or above this is hot (HBM throttles from ~95-105 degC)
MEMORY_HOT_CELSIUS = 95.0
#: an XID is recent for this long after it was last seen (event time, node clock)
XID_RECENT_SECONDS = 30 * 60.0
#: the GPU has fallen off the bus (NVML answers GPU_IS_LOST from then on)
FELL_OFF_BUS_XID = 79

#: the power and thermal reasons that hold a GPU back, by bit, in THROTTLE_REASONS' order
_HELD_BACK = {bit: name for bit, name in THROTTLE_REASONS.items() if bit & THROTTLE_MASK}


def health_of(present: GpuHealth | None, s: GpuSample) -> GpuHealth | None:
    """The health facts of ``s``, the GPU's newest sample: ``present`` itself when none
    changed; None when ``s`` says none of them."""
    temp, memory = s.temperature_celsius, s.memory_temperature_celsius
    reasons, ecc, pending = s.throttle_reasons, s.ecc_uncorrected_total, s.remapped_rows_pending
    if (
        present is not None
        and temp == present.temperature_celsius
        and reasons == present.throttle_reasons
        and memory == present.memory_temperature_celsius
        and ecc == present.ecc_uncorrected_total
        and pending == present.remapped_rows_pending
    ):
        return present
    if temp is None and memory is None and reasons is None and ecc is None and pending is None:
        return None
    held = reasons & THROTTLE_MASK if reasons else 0
    if (
        not held
        and not ecc
        and not pending
        and (temp is None or temp < HOT_CELSIUS)
        and (memory is None or memory < MEMORY_HOT_CELSIUS)
    ):  # the usual case, built without the problems' list (a new temperature each batch)
        return GpuHealth(temp, memory, reasons, (), ecc, pending, ())
    by = tuple(name for bit, name in _HELD_BACK.items() if held & bit)
    problems = [
        HealthProblem.ECC if (ecc or 0) > 0 or pending else None,
        HealthProblem.THROTTLED if held else None,
        HealthProblem.HOT if temp is not None and temp >= HOT_CELSIUS else None,
        HealthProblem.MEMORY_HOT if memory is not None and memory >= MEMORY_HOT_CELSIUS else None,
    ]
    return GpuHealth(temp, memory, reasons, by, ecc, pending, tuple(p for p in problems if p))


def saw_xids(seen: dict[int, float] | None, codes: Iterable[int], at: float) -> dict[int, float]:
    """``seen`` (code -> last seen, node clock; None: none yet) with ``codes`` seen ``at``,
    and without those not seen for ``XID_RECENT_SECONDS`` before it."""
    seen = {} if seen is None else seen
    for code in codes:
        if at > seen.get(code, -1.0):
            seen[code] = at
    for code in [c for c, last in seen.items() if at - last > XID_RECENT_SECONDS]:
        del seen[code]
    return seen


def recent_xids(
    seen: dict[int, float] | None, now: float, offset_seconds: float = 0.0
) -> tuple[XidSeen, ...]:
    """The XIDs of ``seen`` within ``XID_RECENT_SECONDS`` of ``now`` (collector clock; the
    node's is ``offset_seconds`` ahead), newest first, their times on the collector's clock."""
    if not seen:
        return ()
    since = now + offset_seconds - XID_RECENT_SECONDS
    recent = sorted(((last, code) for code, last in seen.items() if last >= since), reverse=True)
    return tuple(XidSeen(code, last - offset_seconds) for last, code in recent)


def problems_of(health: GpuHealth | None, xids: tuple[XidSeen, ...]) -> tuple[HealthProblem, ...]:
    """The GPU's HealthProblem values: its recent hardware XIDs' (79 on its own), then
    its facts'."""
    facts = health.problems if health is not None else ()
    if not xids:
        return facts
    codes = {x.code for x in xids}
    found = (
        HealthProblem.FELL_OFF_BUS if FELL_OFF_BUS_XID in codes else None,
        HealthProblem.XID if not HARDWARE_XIDS.isdisjoint(codes - {FELL_OFF_BUS_XID}) else None,
    )
    return tuple(p for p in found if p) + facts
