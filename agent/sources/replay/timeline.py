"""A replayed GPU's timeline: what it reads at every instant of its recorded life.

One rule, for the live source (``ReplaySource.read``) and for ``gpufleet replay``
(``ReplaySource.iter_samples``): every measured field holds for 1.5 trace steps from the
point that recorded it, on its own. A point that did not record a field (the Alibaba
memory series has points where the duty-cycle series has holes) carries the field's last
value while that value still holds, so a memory reading never cuts the activity's hold
short; past its hold a field is None (unknown, never zero). The last point holds like
every other: the GPU reads until 1.5 steps after it, then it is gone.

Measured fields are the sample's fields whose default is None (None = not recorded).
``activity_coarse`` describes the activity it came with and follows it. What a point says
about itself (workloads, processes, health, XIDs) comes from the latest point; XIDs only
at the point that recorded them; in a gap (nothing holds) only the workloads remain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from agent.model import GpuSample

#: fields held on their own (None = this point did not record it); ``error`` goes with
#: ``healthy``, which is not held (its default, True, is what a trace omits)
HELD_FIELDS = tuple(
    f.name for f in msgspec.structs.fields(GpuSample) if f.default is None and f.name != "error"
)
_ACTIVITY = ("sm_activity", "dram_activity")


@dataclass(frozen=True, slots=True)
class Timeline:
    """One GPU's states in time order: ``times[i]`` is when ``states[i]`` starts; ``points[i]``
    whether a recorded point starts it (else a field's hold ran out there). The last state
    is the end of the GPU's life (nothing holds; it reads no more)."""

    times: list[float]
    states: list[GpuSample]
    points: list[bool]


def build_timeline(recorded: Sequence[GpuSample], hold_seconds: float) -> Timeline:
    """The timeline of one GPU's recorded points (in time order, at least one)."""
    events = sorted({t for s in recorded for t in (s.timestamp, s.timestamp + hold_seconds)})
    held: dict[str, tuple[object, float, GpuSample]] = {}  # field -> (value, expires, source)
    times: list[float] = []
    states: list[GpuSample] = []
    points: list[bool] = []
    next_point = 0
    for i, at in enumerate(events):
        is_point = next_point < len(recorded) and recorded[next_point].timestamp == at
        if is_point:
            point = recorded[next_point]
            next_point += 1
            for name in HELD_FIELDS:
                value = getattr(point, name)
                if value is not None:
                    held[name] = (value, point.timestamp + hold_seconds, point)
        for name in [n for n, (_, expires, _) in held.items() if at >= expires]:
            del held[name]
        latest = recorded[next_point - 1]
        state = _state(latest, held, at, is_point)
        if not is_point and i < len(events) - 1 and _same(states[-1], state):
            continue  # a hold ran out where a later point had already renewed it
        times.append(at)
        states.append(state)
        points.append(is_point)
    return Timeline(times, states, points)


def _state(
    latest: GpuSample, held: dict[str, tuple[object, float, GpuSample]], at: float, is_point: bool
) -> GpuSample:
    if not held:  # a gap, or the end: nothing measured, still held by the last workloads
        return GpuSample(timestamp=at, gpu_uuid=latest.gpu_uuid, workloads=latest.workloads)
    values = {name: held[name][0] if name in held else None for name in HELD_FIELDS}
    source = next((held[n][2] for n in _ACTIVITY if n in held), None)
    return msgspec.structs.replace(
        latest,
        timestamp=at,
        activity_coarse=source.activity_coarse if source is not None else False,
        xid_errors=latest.xid_errors if is_point else (),
        **values,
    )


def _same(a: GpuSample, b: GpuSample) -> bool:
    return msgspec.structs.replace(a, timestamp=b.timestamp) == b
