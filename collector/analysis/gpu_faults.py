"""Verdicts about single GPUs of a workload: faulted boards and stragglers (issue 24).

A faulted GPU is lost (fallen off the bus, NVML answering GPU_IS_LOST), logs hardware XIDs
or gains uncorrected ECC errors while held: its holder pays for a GPU that cannot work. A
straggler is the GPU of a multi-GPU job that stays behind (lower activity, throttled alone,
or faulting alone) while its peers wait for it at every step: the job runs at its pace, so
what it costs is the job's lost time, ``lost_share`` (the gap between its SM activity and
its peers': the share of the window one side of the synchronous job waits for the other)
of every GPU the job holds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from collector.analysis.verdicts import BottleneckPolicy, Cause, Verdict
from collector.analysis.work_window import GpuWindow


def faulted(gpu: GpuWindow, policy: BottleneckPolicy) -> bool:
    return (
        gpu.lost_share >= policy.lost_share
        or gpu.fault_xid_samples > 0
        or gpu.ecc_uncorrected_increase > 0
    )


def find_faults(gpus: Sequence[GpuWindow], policy: BottleneckPolicy) -> Verdict | None:
    """One verdict naming every faulted GPU of the workload, or None."""
    bad = [g for g in gpus if faulted(g, policy)]
    if not bad:
        return None
    lost = [g for g in bad if g.lost_share >= policy.lost_share]
    xids = sum(g.fault_xid_samples for g in bad)
    ecc = sum(g.ecc_uncorrected_increase for g in bad)
    parts = []
    if lost:
        parts.append(f"{len(lost)} GPU{'s' if len(lost) > 1 else ''} lost (off the bus)")
    if xids:
        parts.append(f"hardware XIDs in {xids} samples")
    if ecc:
        parts.append(f"{ecc} new uncorrected ECC errors")
    evidence: dict[str, object] = {
        "faulted_gpus": len(bad),
        "lost_gpus": len(lost),
        "xid_samples": xids,
        "ecc_uncorrected_increase": ecc,
        "nodes": sorted({g.node for g in bad}),
    }
    return Verdict(Cause.GPU_FAULT, ", ".join(parts), evidence, tuple(g.uuid for g in bad))


def find_straggler(
    gpus: Sequence[GpuWindow], policy: BottleneckPolicy
) -> tuple[Verdict, GpuWindow] | None:
    """The GPU the others wait for, among a job's healthy GPUs, and the verdict on it:
    one that throttles alone, else one whose SM activity stays below every peer's by
    ``straggler_gap`` (three GPUs or more: of two, neither is "the" lower one)."""
    healthy = [g for g in gpus if not faulted(g, policy) and g.sm_mean is not None]
    if len(healthy) < 2:
        return None
    for why in (_throttles_alone, _stays_lower):
        for gpu in healthy:
            peers = [g for g in healthy if g is not gpu]
            peer_sm = statistics.median(g.sm_mean or 0.0 for g in peers)
            if peer_sm >= policy.peers_waiting_sm:
                continue  # the peers are busy: nobody waits
            reason = why(gpu, peers, peer_sm, policy)
            if reason is not None:
                return Verdict(Cause.STRAGGLER, reason, _evidence(gpu, peer_sm), (gpu.uuid,)), gpu
    return None


def _evidence(gpu: GpuWindow, peer_sm: float) -> dict[str, object]:
    return {
        "gpu": gpu.uuid,
        "node": gpu.node,
        "sm_activity": gpu.sm_mean,
        "peers_sm_activity": peer_sm,
        #: the job's lost time: the share of the window one side waits for the other
        "lost_share": lost_share(gpu, peer_sm),
        "clock_ratio": gpu.clock_ratio,
        "throttled_share": gpu.throttled_share,
        #: its peers wait (SM idle) this share of the time
        "peers_waiting_share": 1.0 - peer_sm,
    }


def lost_share(gpu: GpuWindow, peer_sm: float) -> float:
    """The straggler's SM activity against its peers' median, as a share of the window: a
    straggler busy 95 % at a throttled clock keeps peers at 50 % waiting 45 % of the time;
    one starved at 30 % against peers at 60 % holds each step back by the same 30 %."""
    return abs((gpu.sm_mean or 0.0) - peer_sm)


def _throttles_alone(
    gpu: GpuWindow, peers: Sequence[GpuWindow], peer_sm: float, policy: BottleneckPolicy
) -> str | None:
    alone = max(p.throttled_share for p in peers) < policy.throttled_share / 5
    if gpu.throttled_share < policy.throttled_share or not alone:
        return None
    clock = f" at {gpu.clock_ratio:.0%} of its clock" if gpu.clock_ratio else ""
    return (
        f"GPU {gpu.uuid[:12]} on {gpu.node} throttles{clock} while its peers wait "
        f"(SM {peer_sm:.0%})"
    )


def _stays_lower(
    gpu: GpuWindow, peers: Sequence[GpuWindow], peer_sm: float, policy: BottleneckPolicy
) -> str | None:
    lowest_peer = min(p.sm_mean or 0.0 for p in peers)
    if len(peers) < 2 or (gpu.sm_mean or 0.0) > lowest_peer - policy.straggler_gap:
        return None
    return (
        f"GPU {gpu.uuid[:12]} on {gpu.node} runs at SM {gpu.sm_mean or 0.0:.0%} against "
        f"its peers' {peer_sm:.0%}"
    )
