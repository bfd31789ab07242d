"""A workload's host CPU and memory from the text of its cgroup's files. Pure: no I/O.

cgroup v2 (the kernel's Documentation/admin-guide/cgroup-v2.rst): ``cpu.stat``
(``usage_usec``, ``nr_periods``, ``nr_throttled``), ``cpu.max`` (``"$QUOTA $PERIOD"`` or
``"max $PERIOD"``), ``memory.pressure`` (PSI, ``some avg10=0.12 ...`` in percent),
``memory.current`` and ``memory.max`` (bytes or ``max``). cgroup v1: ``cpuacct.usage``
(nanoseconds), ``cpu.cfs_quota_us`` (``-1``: unlimited) over ``cpu.cfs_period_us``, the cpu
controller's ``cpu.stat``, ``memory.usage_in_bytes`` and ``memory.limit_in_bytes`` (a
number near 2**63 when unlimited); v1 has no memory pressure.

Usage and throttling are counters: a rate needs two readings, so the first reading of a
cgroup gives ``None`` for them, and so does a reading whose counters went back (the
cgroup was removed and made again under the same name between the two).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.model import WorkloadHostSample

#: cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages, rounded: anything this large
_V1_UNLIMITED_BYTES = 2**62


@dataclass(frozen=True)
class CgroupReading:
    """One read of one cgroup at ``monotonic_seconds``; ``None`` where a file is missing."""

    monotonic_seconds: float
    cpu_usage_seconds: float | None = None
    cpu_periods: int | None = None
    cpu_throttled_periods: int | None = None
    cpu_limit_cores: float | None = None
    memory_pressure_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_limit_bytes: int | None = None


def parse_flat_keyed(text: str) -> dict[str, int]:
    """``key value`` lines (cpu.stat) as integers; malformed lines are skipped."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def parse_cpu_max(text: str) -> float | None:
    """cores from ``"$QUOTA $PERIOD"``; None for ``max`` (unlimited) or nonsense."""
    quota, _, period = text.strip().partition(" ")
    return _cores(quota, period or "100000")


def parse_cfs_limit(quota_text: str, period_text: str) -> float | None:
    """cores from v1 cpu.cfs_quota_us over cpu.cfs_period_us; None for -1 (unlimited)."""
    return _cores(quota_text.strip(), period_text.strip())


def _cores(quota: str, period: str) -> float | None:
    if not (quota.isdigit() and period.isdigit()) or int(period) == 0:
        return None
    return int(quota) / int(period)


def parse_pressure_some_avg10(text: str) -> float | None:
    """0..1 from the ``some`` line's ``avg10`` (a percentage); None when absent."""
    for line in text.splitlines():
        kind, _, fields = line.partition(" ")
        if kind != "some":
            continue
        for field in fields.split():
            name, _, value = field.partition("=")
            if name == "avg10":
                try:
                    return min(1.0, max(0.0, float(value) / 100.0))
                except ValueError:
                    return None
    return None


def parse_bytes(text: str) -> int | None:
    """memory.current / memory.max / v1 memory.*_in_bytes; None for ``max`` or unlimited."""
    value = text.strip()
    if not value.isdigit() or int(value) >= _V1_UNLIMITED_BYTES:
        return None
    return int(value)


def host_sample(
    workload_key: str,
    timestamp: float,
    previous: CgroupReading | None,
    current: CgroupReading,
) -> WorkloadHostSample:
    """What ``current`` says, with the CPU rates over the interval since ``previous``."""
    cores, throttled = None, None
    if previous is not None and not counters_went_back(previous, current):
        cores = _cores_used(previous, current)
        throttled = _throttled_ratio(previous, current)
    return WorkloadHostSample(
        timestamp=timestamp,
        workload_key=workload_key,
        cpu_used_cores=cores,
        cpu_limit_cores=current.cpu_limit_cores,
        cpu_throttled_ratio=throttled,
        memory_pressure_ratio=current.memory_pressure_ratio,
        memory_used_bytes=current.memory_used_bytes,
        memory_limit_bytes=current.memory_limit_bytes,
    )


def counters_went_back(previous: CgroupReading, current: CgroupReading) -> bool:
    """True when a counter decreased: not the same cgroup any more (recreated)."""
    pairs = (
        (previous.cpu_usage_seconds, current.cpu_usage_seconds),
        (previous.cpu_periods, current.cpu_periods),
        (previous.cpu_throttled_periods, current.cpu_throttled_periods),
    )
    return any(a is not None and b is not None and b < a for a, b in pairs)


def _cores_used(previous: CgroupReading, current: CgroupReading) -> float | None:
    elapsed = current.monotonic_seconds - previous.monotonic_seconds
    if previous.cpu_usage_seconds is None or current.cpu_usage_seconds is None or elapsed <= 0:
        return None
    return (current.cpu_usage_seconds - previous.cpu_usage_seconds) / elapsed


def _throttled_ratio(previous: CgroupReading, current: CgroupReading) -> float | None:
    """Throttled share of the enforcement periods that elapsed; 0 for a limited cgroup
    that ran in none of them (idle), None for an unlimited one (no periods at all)."""
    p0, p1 = previous.cpu_periods, current.cpu_periods
    t0, t1 = previous.cpu_throttled_periods, current.cpu_throttled_periods
    if p0 is None or p1 is None or t0 is None or t1 is None:
        return None
    if p1 <= p0:
        return 0.0 if current.cpu_limit_cores is not None else None
    return min(1.0, (t1 - t0) / (p1 - p0))
