"""Encoder and decoder utilisation (nvidia-smi's utilization.encoder/decoder) through the
real binding over the fake NVML library: percent in the scenario, a ratio in the sample,
None where NVML says NotSupported, which is counted once and not asked again."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from agent.config import SourceSettings
from agent.model import GpuSample
from agent.sources.nvml.source import NvmlSource
from agent.stats import AgentStats
from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario
from tests.fakes.nvml_scenario import Scenario, with_gpu

NOW = 1_750_000_000.0
H100_0 = "GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000000"
H100_1 = "GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000001"
MIG_PARENT = "GPU-a100f1f0-0000-4000-8000-000000000000"
ENCODER, DECODER = "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization"
READS = 3


def read_all(scenario: Scenario, stats: AgentStats) -> tuple[dict[str, GpuSample], Counter[str]]:
    """The last of READS reads, by uuid, and how often each (symbol, uuid) was called."""
    clock = FakeClock()
    with install_fake_nvml(scenario, clock) as fake:
        source = NvmlSource(SourceSettings(), stats, monotonic=clock, sleep=clock.sleep)
        try:
            for _ in range(READS):
                samples = {s.gpu_uuid: s for s in source.read(NOW)}
                clock.advance(1.0)
        finally:
            source.close()
        calls = Counter({f"{symbol} {uuid}": n for (symbol, uuid), n in fake.device_calls.items()})
    return samples, calls


def test_encoder_and_decoder_percent_become_ratios() -> None:
    scenario = with_gpu(
        load_scenario("h100_sxm_8x_gpm"),
        0,
        encoder_utilization_percent=37,
        decoder_utilization_percent=88,
    )
    samples, calls = read_all(scenario, AgentStats())
    busy, idle = samples[H100_0], samples[H100_1]
    assert (busy.encoder_activity, busy.decoder_activity) == (0.37, 0.88)
    assert (idle.encoder_activity, idle.decoder_activity) == (0.0, 0.0)
    assert calls[f"{ENCODER} {H100_0}"] == READS and calls[f"{DECODER} {H100_0}"] == READS


def test_not_supported_is_none_counted_once_and_not_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agent.sources.nvml.source")
    scenario = with_gpu(
        load_scenario("h100_sxm_8x_gpm"),
        0,
        not_supported=frozenset({ENCODER}),
        decoder_utilization_percent=25,
    )
    stats = AgentStats()
    samples, calls = read_all(scenario, stats)
    sample = samples[H100_0]
    assert sample.healthy
    assert sample.encoder_activity is None
    assert sample.decoder_activity == 0.25
    assert calls[f"{ENCODER} {H100_0}"] == 1
    errors = stats.snapshot().field_errors_total
    assert errors[(H100_0, "encoder_activity")] == 1
    assert (H100_0, "decoder_activity") not in errors
    lines = [r for r in caplog.records if "encoder_activity" in r.getMessage()]
    assert len(lines) == 1 and H100_0 in lines[0].getMessage()


def test_mig_parent_and_instances_answer_not_supported() -> None:
    stats = AgentStats()
    samples, calls = read_all(load_scenario("a100_mig"), stats)
    assert len(samples) == 4 and MIG_PARENT in samples
    errors = stats.snapshot().field_errors_total
    for uuid, sample in samples.items():
        assert sample.healthy, uuid
        assert (sample.encoder_activity, sample.decoder_activity) == (None, None)
        assert calls[f"{ENCODER} {uuid}"] == calls[f"{DECODER} {uuid}"] == 1
        assert errors[(uuid, "encoder_activity")] == errors[(uuid, "decoder_activity")] == 1
