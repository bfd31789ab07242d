"""Sampler over the real NvmlSource (fake NVML library behind the real binding): the
agent's read figures count each tick once, whichever source is read."""

from __future__ import annotations

from agent.config import SourceSettings
from agent.sampler import Sampler
from agent.sources.nvml.source import NvmlSource
from agent.stats import AgentStats
from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario

NOW = 1_750_000_000.0


def test_one_tick_over_nvml_is_one_read() -> None:
    clock, stats = FakeClock(), AgentStats()
    with install_fake_nvml(load_scenario("h100_sxm_8x_gpm"), clock):
        source = NvmlSource(SourceSettings(), stats, monotonic=clock, sleep=clock.sleep)
        sampler = Sampler(source, stats, 10.0, clock=lambda: NOW, monotonic=clock)
        try:
            sampler.tick()
            first = stats.snapshot()
            clock.advance(0.25)
            sampler.tick()
            second = stats.snapshot()
        finally:
            source.close()
    assert (first.reads_total, second.reads_total) == (1, 2)
    assert second.read_seconds_total == first.read_seconds_total + second.last_read_seconds


def test_unhealthy_gpus_still_counted_once_the_sampler_owns_the_read() -> None:
    clock, stats = FakeClock(), AgentStats()
    with install_fake_nvml(load_scenario("gpu_lost_midrun"), clock):
        source = NvmlSource(SourceSettings(), stats, monotonic=clock, sleep=clock.sleep)
        sampler = Sampler(source, stats, 10.0, clock=lambda: NOW, monotonic=clock)
        try:
            unhealthy = []
            for _ in range(3):  # GPU 1 falls off the bus at its third read
                sampler.tick()
                unhealthy.append(stats.snapshot().unhealthy_gpus)
        finally:
            source.close()
    assert unhealthy == [0, 0, 1]
    assert stats.snapshot().reads_total == 3
