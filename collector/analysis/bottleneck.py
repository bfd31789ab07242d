"""Why a workload wastes the GPUs it holds: bottleneck verdicts priced in money (issue 24).

``diagnose`` is pure: over one workload's window (collector/analysis/work_window.py) and
its GPUs' hourly prices, it names the likely bottlenecks (input-bound, host-CPU-bound,
communication-bound, memory-bandwidth-bound, throttled, no tensor-core use, a straggler, a
faulted GPU) with their evidence, and prices them. The money is the workload's unused
share, price x (1 - used share) summed over its GPUs, split among the verdicts: a faulted
GPU's verdict takes that GPU's unused money; a straggler takes the job's lost time (its
``lost_share`` of the price of every working GPU of the job: in a synchronous job the peers
wait for the slowest); the others share the rest equally. The verdicts never add up to
more than the workload leaves unused; what no verdict explains (a straggler's job whose
GPUs also idle for reasons of their own) is ``Diagnosis.unattributed_per_hour``, so the
verdicts and it add up to exactly the unused share.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from collector.analysis.gpu_faults import faulted, find_faults, find_straggler
from collector.analysis.verdicts import BottleneckPolicy, Cause, Verdict
from collector.analysis.work_window import GpuWindow, HostWindow, WorkloadWindow


@dataclass(frozen=True)
class Diagnosis:
    """A workload's verdicts; money per hour in the price book's currency."""

    window: WorkloadWindow
    model: str
    used_share: float
    price_per_hour: float
    unused_per_hour: float
    verdicts: tuple[Verdict, ...]
    #: the right-sizing note ("~3 GPUs would do at this use"); empty when none
    note: str = ""

    @property
    def gpu_count(self) -> int:
        return len(self.window.gpus)

    @property
    def unattributed_per_hour(self) -> float:
        """The unused money no verdict accounts for (never negative)."""
        return max(0.0, self.unused_per_hour - sum(v.money_per_hour for v in self.verdicts))


def diagnose(
    window: WorkloadWindow, prices: Mapping[str, float], policy: BottleneckPolicy
) -> Diagnosis | None:
    """The workload's verdicts, or None when the window is too short or nothing is found.

    ``prices``: each GPU's hourly price by uuid (a GPU missing from it costs nothing)."""
    gpus = window.gpus
    if not gpus or window.seconds < policy.min_window_seconds:
        return None
    found: list[Verdict] = []
    if (fault := find_faults(gpus, policy)) is not None:
        found.append(fault)
    working = [g for g in gpus if not faulted(g, policy)]
    if working and _mean(g.sm_mean for g in working) >= policy.busy_sm:
        found += _busy_verdicts(working, window.host, policy)
    if not found:
        return None
    unused = {g.uuid: prices.get(g.uuid, 0.0) * (1.0 - min(1.0, g.used_share)) for g in gpus}
    used = _mean(g.used_share for g in gpus)
    return Diagnosis(
        window=window,
        model=", ".join(sorted({g.model for g in gpus})),
        used_share=used,
        price_per_hour=sum(prices.get(g.uuid, 0.0) for g in gpus),
        unused_per_hour=sum(unused.values()),
        verdicts=_priced(found, unused, {g.uuid: prices.get(g.uuid, 0.0) for g in working}),
        note=_right_size_note(len(gpus), used),
    )


def _busy_verdicts(
    gpus: list[GpuWindow], host: HostWindow | None, policy: BottleneckPolicy
) -> list[Verdict]:
    out: list[Verdict] = []
    straggler = find_straggler(gpus, policy)
    if straggler is not None:
        out.append(straggler[0])
        gpus = [g for g in gpus if g is not straggler[1]]
    rules: list[Callable[[list[GpuWindow], HostWindow | None, BottleneckPolicy], Verdict | None]]
    rules = [_throttled, _no_tensor_cores]
    if straggler is None and _mean(g.sm_mean for g in gpus) < policy.low_sm:
        rules += [_communication_bound, _memory_bound, _input_or_cpu_bound]
    out += [v for rule in rules if (v := rule(gpus, host, policy)) is not None]
    return out


def _throttled(
    gpus: list[GpuWindow], _host: HostWindow | None, policy: BottleneckPolicy
) -> Verdict | None:
    slow = [
        g
        for g in gpus
        if g.throttled_share >= policy.throttled_share
        and g.clock_ratio is not None
        and g.clock_ratio < policy.clock_low
    ]
    if 2 * len(slow) < len(gpus) or not slow:
        return None
    clock = _mean(g.clock_ratio for g in slow)
    share = _mean(g.throttled_share for g in slow)
    reason = f"clocks at {clock:.0%} of default, power/thermal throttling {share:.0%} of the time"
    evidence: dict[str, object] = {
        "clock_ratio": clock,
        "throttled_share": share,
        "throttled_gpus": len(slow),
    }
    return Verdict(Cause.THROTTLED, reason, evidence, tuple(g.uuid for g in slow))


def _no_tensor_cores(
    gpus: list[GpuWindow], _host: HostWindow | None, policy: BottleneckPolicy
) -> Verdict | None:
    known = [g for g in gpus if g.tensor_mean is not None]
    if not known or len(known) < len(gpus):
        return None  # no GPM, or not on every GPU: cannot say
    sm, tensor = _mean(g.sm_mean for g in known), _mean(g.tensor_mean for g in known)
    if sm < policy.tensor_busy_sm or tensor >= policy.tensor_low:
        return None
    reason = f"SM busy {sm:.0%} but tensor cores at {tensor:.1%}"
    return Verdict(Cause.NO_TENSOR_CORES, reason, {"sm_activity": sm, "tensor_activity": tensor})


def _communication_bound(
    gpus: list[GpuWindow], _host: HostWindow | None, policy: BottleneckPolicy
) -> Verdict | None:
    rates = [g.nvlink_bytes_per_second for g in gpus]
    if len(gpus) < 2 or any(r is None for r in rates):
        return None
    lowest = min(r for r in rates if r is not None)
    if lowest < policy.nvlink_busy_bytes_per_second:
        return None  # in step: every GPU of the job, not one
    sm = _mean(g.sm_mean for g in gpus)
    reason = f"NVLink at {lowest / 1e9:.0f} GB/s or more on all {len(gpus)} GPUs, SM {sm:.0%}"
    evidence: dict[str, object] = {"nvlink_bytes_per_second_min": lowest, "sm_activity": sm}
    return Verdict(Cause.COMMUNICATION_BOUND, reason, evidence)


def _memory_bound(
    gpus: list[GpuWindow], _host: HostWindow | None, policy: BottleneckPolicy
) -> Verdict | None:
    sm, dram = _mean(g.sm_mean for g in gpus), _mean(g.dram_mean for g in gpus)
    if dram < policy.dram_high or dram < sm + policy.dram_over_sm:
        return None
    reason = f"memory bandwidth at {dram:.0%}, SM {sm:.0%}"
    return Verdict(Cause.MEMORY_BANDWIDTH_BOUND, reason, {"dram_activity": dram, "sm_activity": sm})


def _input_or_cpu_bound(
    gpus: list[GpuWindow], host: HostWindow | None, policy: BottleneckPolicy
) -> Verdict | None:
    """Input-bound: the loader's PCIe bursts, or a saw-tooth with host CPU at its limit;
    host-CPU-bound: CPU at its limit with neither (the GPU starves evenly)."""
    sm = _mean(g.sm_mean for g in gpus)
    burst = max((g.pcie_rx_share_burst or 0.0 for g in gpus), default=0.0)
    wobble = _mean(g.sm_wobble for g in gpus)
    sawtooth = sm > 0 and wobble / sm >= policy.sawtooth
    cpu = host.cpu_share_of_limit if host is not None else None
    at_limit = cpu is not None and cpu >= policy.cpu_at_limit
    evidence: dict[str, object] = {
        "sm_activity": sm,
        "pcie_rx_burst_share": burst,
        "sm_wobble": wobble,
        "host_cpu_share_of_limit": cpu,
        "host_cpu_limit_cores": host.cpu_limit_cores if host else None,
    }
    if burst >= policy.pcie_burst or (sawtooth and at_limit):
        return Verdict(Cause.INPUT_BOUND, _input_reason(host, burst, sawtooth, at_limit), evidence)
    if at_limit and host is not None:
        return Verdict(Cause.HOST_CPU_BOUND, _cpu_reason(host), evidence)
    return None


def _input_reason(host: HostWindow | None, burst: float, sawtooth: bool, at_limit: bool) -> str:
    if at_limit and host is not None:
        return _cpu_reason(host)
    if burst:
        return f"PCIe RX bursts at {burst:.0%} of the link while SM waits"
    return "SM activity saw-tooths" if sawtooth else "the GPU waits for input"


def _cpu_reason(host: HostWindow) -> str:
    share = host.cpu_share_of_limit or 0.0
    return f"host CPU at {share:.0%} of its {host.cpu_limit_cores:g}-core limit"


def _priced(
    found: Sequence[Verdict], unused: Mapping[str, float], working: Mapping[str, float]
) -> tuple[Verdict, ...]:
    """Split the unused money: a fault takes its GPUs', a straggler the job's lost time
    (``working``: the hourly price of each GPU not faulted), the rest share what is left."""
    left = sum(unused.values())
    money: dict[int, float] = {}
    for i, v in enumerate(found):
        if v.cause is Cause.GPU_FAULT:
            money[i] = sum(unused[u] for u in v.gpu_uuids)
        elif v.cause is Cause.STRAGGLER:
            share = v.evidence.get("lost_share", 0.0)
            money[i] = sum(working.values()) * (share if isinstance(share, float) else 0.0)
        else:
            continue
        money[i] = min(money[i], left)
        left -= money[i]
    others = [i for i in range(len(found)) if i not in money]
    money.update({i: left / len(others) for i in others})
    return tuple(dataclasses.replace(v, money_per_hour=money[i]) for i, v in enumerate(found))


def _right_size_note(gpu_count: int, used_share: float) -> str:
    if gpu_count > 1 and used_share < 0.5:
        need = max(1, round(gpu_count * used_share + 0.5))
        return f"~{need} of its {gpu_count} GPUs would do at this use"
    if gpu_count == 1 and used_share < 0.3:
        return "a smaller GPU or a MIG slice would do at this use"
    return ""


def _mean(values: Iterable[float | None]) -> float:
    found = [v for v in values if v is not None]
    return statistics.fmean(found) if found else 0.0


def describe(diagnosis: Diagnosis, currency: str) -> str:
    """The sentence a person reads: "This job uses ~38 % of 8 H100s (21 USD/h unused);
    likely input-bound: host CPU at 100 % of its 4-core limit; try more data-loader
    workers or CPU." """
    n = diagnosis.gpu_count
    gpus = f"{n} {diagnosis.model}{'s' if n > 1 else ''}" if n > 1 else f"its {diagnosis.model}"
    head = (
        f"This job uses ~{diagnosis.used_share:.0%} of {gpus} "
        f"({diagnosis.unused_per_hour:.2f} {currency}/h unused)"
    )
    causes = "; ".join(
        f"likely {v.cause.value.replace('_', '-')}: {v.reason}; {v.advice}"
        for v in diagnosis.verdicts
    )
    note = f" ({diagnosis.note})" if diagnosis.note else ""
    return f"{head}; {causes}.{note}".replace("%", " %")
