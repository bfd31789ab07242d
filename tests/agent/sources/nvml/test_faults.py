"""NvmlSource when things go wrong: lost GPUs, wedged calls, NotSupported, no NVML at all."""

from __future__ import annotations

import ctypes.util
import logging
import time

import pynvml
import pytest

from agent.config import SourceSettings
from agent.sources.interface import SourceError
from agent.sources.nvml.source import NvmlSource
from agent.stats import AgentStats
from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario
from tests.fakes.nvml_scenario import with_gpu

NOW = 1_750_000_000.0
HEALTHY = "GPU-10570000-0000-4000-8000-000000000000"
FALLING = "GPU-10570000-0000-4000-8000-000000000001"
L4 = "GPU-14000000-0000-4000-8000-000000000000"


def test_lost_gpu_is_unhealthy_others_report_then_nvml_restarts_with_fresh_handles() -> None:
    clock, stats = FakeClock(), AgentStats()
    with install_fake_nvml(load_scenario("gpu_lost_midrun"), clock) as fake:
        source = NvmlSource(SourceSettings(), stats, monotonic=clock, sleep=clock.sleep)
        assert all(s.healthy for _ in range(2) for s in source.read(NOW))
        healthy, lost = source.read(NOW)  # GPU 1 falls off the bus at its third read
        assert healthy.healthy and healthy.power_watts == 250.0 and healthy.sm_activity == 1.0
        assert not lost.healthy and lost.gpu_uuid == FALLING
        assert lost.error is not None and "GPU is lost" in lost.error
        assert lost.power_watts is None and lost.sm_activity is None
        assert [info.uuid for info in source.discover()] == [HEALTHY, FALLING]

        clock.advance(0.5)  # inside the backoff: no re-init, the lost GPU is not polled
        polled = fake.device_calls[("nvmlDeviceGetFieldValues", FALLING)]
        assert not source.read(NOW)[1].healthy
        assert fake.init_calls == 1
        assert fake.device_calls[("nvmlDeviceGetFieldValues", FALLING)] == polled

        clock.advance(0.5)
        samples = source.read(NOW)
        source.close()
    assert (fake.shutdown_calls, fake.init_calls) == (2, 2)  # re-init, then close
    assert all(sample.healthy for sample in samples)
    assert samples[1].power_watts == 250.0
    assert fake.stale_handle_calls == []  # no call with a handle of the ended session


def test_a_gpu_that_stays_lost_is_retried_with_growing_backoff() -> None:
    scenario = with_gpu(load_scenario("gpu_lost_midrun"), 1, recovers_after_inits=None)
    clock = FakeClock()
    with install_fake_nvml(scenario, clock) as fake:
        source = NvmlSource(SourceSettings(), monotonic=clock, sleep=clock.sleep)
        inits = []
        for _ in range(10):
            samples = source.read(NOW)
            inits.append(fake.init_calls)
            clock.advance(1.0)
        source.close()
    # lost at read 3; re-inits 1 s, then 2 s, then 4 s after
    assert inits == [1, 1, 1, 2, 2, 3, 3, 3, 3, 4]
    assert samples[0].healthy and not samples[1].healthy
    assert fake.stale_handle_calls == []


def test_a_wedged_gpu_does_not_hold_up_the_read() -> None:
    settings = SourceSettings(nvml_call_timeout_seconds=0.2)
    with install_fake_nvml(load_scenario("a100_4x_no_gpm")) as fake:
        source = NvmlSource(settings)
        infos = source.discover()
        wedged = infos[1].uuid
        fake.wedge(wedged, 1.0)
        started = time.monotonic()
        samples = source.read(NOW)
        assert time.monotonic() - started < 0.6
        assert [s.healthy for s in samples] == [True, False, True, True]
        assert samples[1].error == "timeout" and samples[1].gpu_uuid == wedged
        assert samples[0].power_watts == 287.5
        # still stuck: answered at once, nothing queued behind the stuck call
        assert source.read(NOW)[1].error == "timeout"
        time.sleep(1.0)
        recovered = source.read(NOW)[1]
        source.close()
    assert recovered.healthy and recovered.power_watts == 61.25


def test_not_supported_is_none_logged_once_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent.sources.nvml.source")
    stats, clock = AgentStats(), FakeClock()
    with install_fake_nvml(load_scenario("fields_not_supported"), clock) as fake:
        source = NvmlSource(SourceSettings(), stats, monotonic=clock, sleep=clock.sleep)
        for _ in range(3):
            [sample] = source.read(NOW)
            clock.advance(1.0)
        source.close()
    assert sample.healthy
    assert sample.memory_temperature_celsius is None
    assert (sample.ecc_corrected_total, sample.ecc_uncorrected_total) == (None, None)
    assert sample.remapped_rows_pending is None and sample.throttle_reasons is None
    assert sample.processes[0].sm_share is None and sample.processes[0].pid == 2020
    # the unsupported fields' older calls answer instead
    assert sample.power_watts == 35.125
    assert sample.energy_joules == (777000 + 35125 * 2) / 1000
    for field in ("memory_temperature_celsius", "throttle_reasons", "process_sm_share"):
        lines = [r for r in caplog.records if field in r.getMessage() and L4 in r.getMessage()]
        assert len(lines) == 1, field
        assert stats.snapshot().field_errors_total[(L4, field)] == 1
    # once known unsupported, a field is no longer asked for: here that is every field
    # of the batch, so the batch call itself stops after the first read
    [(_, asked)] = fake.field_requests
    assert pynvml.NVML_FI_DEV_MEMORY_TEMP in asked
    assert fake.device_calls[("nvmlDeviceGetProcessUtilization", L4)] == 1


def test_close_frees_gpm_buffers_and_event_sets_and_shuts_nvml_down() -> None:
    clock = FakeClock()
    with install_fake_nvml(load_scenario("h100_sxm_8x_gpm"), clock) as fake:
        source = NvmlSource(SourceSettings(), monotonic=clock, sleep=clock.sleep)
        source.read(NOW)
        assert len(fake.gpm_samples) == 16 and len(fake.event_sets) == 8
        source.close()
    assert fake.gpm_samples == {} and fake.event_sets == {}
    assert fake.refcount == 0


def test_driver_not_loaded_is_a_source_error_that_says_so() -> None:
    with install_fake_nvml(load_scenario("a100_4x_no_gpm")) as fake:
        fake.init_result = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
        with pytest.raises(SourceError, match="kernel driver is not loaded") as caught:
            NvmlSource(SourceSettings()).discover()
    assert isinstance(caught.value.__cause__, pynvml.NVMLError_DriverNotLoaded)


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this host has an NVML library"
)
def test_missing_nvml_library_is_a_source_error() -> None:
    assert pynvml.nvmlLib is None  # no fake installed, nothing loaded
    with pytest.raises(SourceError, match=r"libnvidia-ml\.so\.1 not found") as caught:
        NvmlSource(SourceSettings()).read(NOW)
    assert isinstance(caught.value.__cause__, pynvml.NVMLError_LibraryNotFound)


def test_a_field_the_gpu_rejects_is_dropped_from_later_batches() -> None:
    scenario = with_gpu(
        load_scenario("h100_sxm_8x_gpm"), 0, not_supported=frozenset({"NVML_FI_DEV_MEMORY_TEMP"})
    )
    clock = FakeClock()
    with install_fake_nvml(scenario, clock) as fake:
        source = NvmlSource(SourceSettings(), monotonic=clock, sleep=clock.sleep)
        first = source.read(NOW)[0]
        clock.advance(1.0)
        second = source.read(NOW)[0]
        source.close()
    asked = [ids for uuid, ids in fake.field_requests if uuid == first.gpu_uuid]
    assert pynvml.NVML_FI_DEV_MEMORY_TEMP in asked[0]
    assert pynvml.NVML_FI_DEV_MEMORY_TEMP not in asked[1]
    assert pynvml.NVML_FI_DEV_POWER_INSTANT in asked[1]
    assert first.memory_temperature_celsius is None is second.memory_temperature_celsius
    assert second.power_watts == 512.345
