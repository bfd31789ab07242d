"""Comparing what the collector measured with the simulator's ground truth."""

from __future__ import annotations

from agent.sources.simulated.source import SimJob, SimulatedFleet


def relative_error(measured: float, truth: float) -> float:
    if truth == 0:
        return 0.0 if measured == 0 else float("inf")
    return abs(measured - truth) / truth


def held_span(job: SimJob, start: float, end: float) -> tuple[float, float]:
    """When ``job`` held its GPUs, clipped to the run."""
    began = start if job.start_time is None else max(job.start_time, start)
    return began, end if job.end_time is None else min(job.end_time, end)


def gpus_of(fleet: SimulatedFleet, job: SimJob) -> list[str]:
    return [u for u in fleet.gpu_uuids if job in fleet.gpu(u).jobs]
