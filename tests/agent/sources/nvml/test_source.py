"""NvmlSource against the real nvidia-ml-py binding with a fake C library behind it.

Expected figures come from the scenario files (tests/fixtures/nvml), which hold what the
driver would report in its own units (mW, mJ, MHz, %); the agent must give SI units.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

import pynvml
import pytest

from agent.config import SourceSettings
from agent.model import GpuSample
from agent.sources.nvml.source import NvmlSource
from agent.stats import AgentStats
from tests.fakes.nvml_lib import FakeClock, FakeNvml, install_fake_nvml, load_scenario
from tests.fakes.nvml_scenario import GpmSpec, MigSpec, ProcessSpec, with_gpu

NOW = 1_750_000_000.0
H100_0 = "GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000000"
H100_3 = "GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000003"
A100_0 = "GPU-a1000000-0000-4000-8000-000000000000"
MIG_PARENT = "GPU-a100f1f0-0000-4000-8000-000000000000"


@contextmanager
def running(
    scenario: str, stats: AgentStats | None = None
) -> Iterator[tuple[NvmlSource, FakeNvml, FakeClock]]:
    clock = FakeClock()
    with install_fake_nvml(load_scenario(scenario), clock) as fake:
        source = NvmlSource(SourceSettings(), stats, monotonic=clock, sleep=clock.sleep)
        try:
            yield source, fake, clock
        finally:
            source.close()


def by_uuid(samples: list[GpuSample]) -> dict[str, GpuSample]:
    return {sample.gpu_uuid: sample for sample in samples}


def test_h100_identities_in_index_order() -> None:
    with running("h100_sxm_8x_gpm") as (source, _, _):
        infos = source.discover()
    assert [info.index for info in infos] == list(range(8))
    first = infos[0]
    assert first.uuid == H100_0
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.architecture == "hopper"
    assert first.memory_total_bytes == 85520809984
    assert first.pci_bus_id == "00000000:18:00.0"
    assert (first.driver_version, first.cuda_version) == ("550.54.15", "12.4")
    assert first.power_limit_watts == 700.0
    assert not first.mig_enabled
    assert infos[7].pci_bus_id == "00000000:DB:00.0"


def test_h100_sample_in_si_units_from_gpm() -> None:
    with running("h100_sxm_8x_gpm") as (source, _, _):
        sample = by_uuid(source.read(NOW))[H100_0]
    assert sample.timestamp == NOW and sample.healthy
    assert not sample.activity_coarse
    assert sample.sm_activity == pytest.approx(0.875, rel=1e-12)
    assert sample.sm_occupancy == pytest.approx(0.4375, rel=1e-12)
    assert sample.tensor_activity == pytest.approx(0.625, rel=1e-12)
    assert sample.dram_activity == pytest.approx(0.5525, rel=1e-12)
    assert sample.power_watts == 512.345  # 512345 mW
    assert sample.temperature_celsius == 64.0
    assert sample.memory_temperature_celsius == 71.0
    assert sample.sm_clock_hertz == 1_980_000_000.0
    assert sample.memory_clock_hertz == 2_619_000_000.0
    assert sample.memory_used_bytes == 68719476736
    assert sample.memory_total_bytes == 85520809984
    assert sample.memory_reserved_bytes == 566231040
    assert sample.throttle_reasons == 0x4
    assert (sample.ecc_corrected_total, sample.ecc_uncorrected_total) == (0, 0)
    [process] = sample.processes
    assert (process.pid, process.used_memory_bytes, process.sm_share) == (4242, 68719476736, 0.93)


def test_remapped_rows_and_ecc_counts() -> None:
    with running("h100_sxm_8x_gpm") as (source, _, _):
        samples = source.read(NOW)
    assert samples[3].ecc_corrected_total == 17
    assert samples[7].remapped_rows_correctable == 2
    assert samples[7].remapped_rows_uncorrectable == 0
    assert samples[7].remapped_rows_pending is True
    assert samples[6].remapped_rows_pending is False


def test_energy_counter_in_joules_grows_with_power_times_time() -> None:
    with running("a100_4x_no_gpm") as (source, fake, clock):
        assert by_uuid(source.read(NOW))[A100_0].energy_joules == 123456.789  # 123456789 mJ
        clock.advance(10.0)  # 287.5 W for 10 s
        assert by_uuid(source.read(NOW))[A100_0].energy_joules == 126331.789
        fake.set_power(A100_0, 100_000)
        clock.advance(5.0)  # 100 W for 5 s
        sample = by_uuid(source.read(NOW))[A100_0]
    assert sample.energy_joules == 126831.789
    assert sample.power_watts == 100.0


def test_gpm_metric_is_the_time_weighted_mean_between_reads() -> None:
    with running("h100_sxm_8x_gpm") as (source, fake, clock):
        source.read(NOW)  # seeds GPM; the GPUs' threads wait out the gap in parallel
        clock.advance(1.0)
        source.read(NOW)  # from here on every GPU samples once per read, at read time
        clock.advance(0.5)
        fake.set_gpm(H100_0, sm_util_percent=12.5)
        clock.advance(0.5)
        sample = by_uuid(source.read(NOW))[H100_0]
    # 87.5 % for half a second, then 12.5 % for half a second
    assert sample.sm_activity == pytest.approx(0.5, rel=1e-9)
    assert sample.sm_occupancy == pytest.approx(0.4375, rel=1e-9)


def test_gpm_keeps_its_previous_sample_between_reads() -> None:
    with running("h100_sxm_8x_gpm") as (source, fake, clock):
        source.read(NOW)
        assert len(fake.gpm_sample_times[(0, None)]) == 2  # the first read seeds
        clock.advance(1.0)
        source.read(NOW)
        assert len(fake.gpm_sample_times[(0, None)]) == 3  # one new sample suffices
        sample = by_uuid(source.read(NOW))[H100_0]  # at once: waits out the gap
        times = fake.gpm_sample_times[(0, None)]
    assert len(times) == 4
    assert all(later - earlier >= 0.1 - 1e-9 for earlier, later in itertools.pairwise(times))
    assert sample.sm_activity == pytest.approx(0.875, rel=1e-9)  # not the zeros of < 100 ms


def test_gpm_asks_only_for_the_metrics_it_reports() -> None:
    with running("h100_sxm_8x_gpm") as (source, fake, _):
        source.read(NOW)
    wanted = {
        pynvml.NVML_GPM_METRIC_SM_UTIL,
        pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
        pynvml.NVML_GPM_METRIC_FP64_UTIL,
        pynvml.NVML_GPM_METRIC_FP32_UTIL,
        pynvml.NVML_GPM_METRIC_FP16_UTIL,
        pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
        pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC,
        pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
        pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
    }
    assert fake.gpm_metric_requests
    assert all(set(request) == wanted for request in fake.gpm_metric_requests)


def test_a100_without_gpm_reports_coarse_utilisation() -> None:
    with running("a100_4x_no_gpm") as (source, fake, _):
        infos = source.discover()
        sample = by_uuid(source.read(NOW))[A100_0]
    assert infos[0].architecture == "ampere"
    assert sample.activity_coarse
    assert (sample.sm_activity, sample.dram_activity) == (0.87, 0.45)
    assert (sample.sm_occupancy, sample.tensor_activity) == (None, None)
    assert fake.calls["nvmlGpmSampleGet"] == 0
    assert sample.power_watts == 287.5
    assert sample.processes[0].sm_share == 0.87


def test_mig_instances_listed_with_profile_and_parent() -> None:
    with running("a100_mig") as (source, fake, _):
        infos = source.discover()
        samples = by_uuid(source.read(NOW))
    parent, *instances = infos
    assert parent.uuid == MIG_PARENT and parent.mig_enabled
    assert [i.mig_profile for i in instances] == ["3g.40gb", "2g.20gb", "2g.20gb"]
    assert [i.mig_gpu_instance_id for i in instances] == [2, 3, 4]
    assert parent.mig_gpu_instance_id is None
    assert {i.mig_parent_uuid for i in instances} == {MIG_PARENT}
    assert [i.memory_total_bytes for i in instances] == [42144366592, 20937965568, 20937965568]
    assert all(i.uuid.startswith("MIG-") and i.name == parent.name for i in instances)
    assert set(samples) == {info.uuid for info in infos}
    whole = samples[MIG_PARENT]
    assert whole.power_watts == 180.0 and whole.energy_joules == 5000.0
    assert whole.sm_activity is None and not whole.activity_coarse
    assert whole.processes == ()  # they belong to the instances
    big = samples[instances[0].uuid]
    assert big.memory_used_bytes == 21474836480 and big.power_watts is None
    assert [(p.pid, p.used_memory_bytes, p.sm_share) for p in big.processes] == [
        (9101, 21474836480, None)
    ]
    assert samples[instances[2].uuid].processes == ()
    # known to be NotSupported with MIG enabled: not even asked
    assert fake.calls["nvmlDeviceGetUtilizationRates"] == 0
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 0


def test_old_driver_uses_the_older_calls() -> None:
    with running("old_driver_no_v3") as (source, fake, clock):
        source.read(NOW)
        clock.advance(2.0)
        [sample] = source.read(NOW)
    assert [(p.pid, p.used_memory_bytes, p.sm_share) for p in sample.processes] == [
        (3131, 17179869184, 0.64)
    ]
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] >= 2
    assert sample.memory_used_bytes == 17179869184 and sample.memory_reserved_bytes is None
    assert sample.temperature_celsius == 58.0
    assert sample.throttle_reasons == 0x4
    assert sample.power_watts == 215.75  # nvmlDeviceGetPowerUsage
    assert sample.energy_joules == 4000431.5  # nvmlDeviceGetTotalEnergyConsumption
    assert sample.activity_coarse and sample.sm_activity == 0.64
    assert sample.remapped_rows_pending is None


def test_xid_events_are_collected_once() -> None:
    with running("h100_sxm_8x_gpm") as (source, fake, clock):
        first = source.read(NOW)[3]
        clock.advance(1.0)
        second = source.read(NOW)[3]  # the fixture raises XID 79 at read 2
        fake.emit_xid(H100_3, 48)
        fake.emit_xid(H100_3, 94)
        clock.advance(1.0)
        third = source.read(NOW)[3]
        clock.advance(1.0)
        fourth = source.read(NOW)[3]
    assert (first.xid_errors, second.xid_errors) == ((), (79,))
    assert third.xid_errors == (48, 94)
    assert fourth.xid_errors == ()
    assert third.gpu_uuid == H100_3


def test_every_sample_carries_the_read_time() -> None:
    with running("a100_mig") as (source, _, _):
        assert {sample.timestamp for sample in source.read(NOW + 0.25)} == {NOW + 0.25}


def test_hopper_mig_instance_activity_comes_from_gpm_through_the_parent() -> None:
    instance = MigSpec(
        uuid="MIG-h1000000-0000-4000-8000-000000000001",
        profile="3g.40gb",
        gpu_instance_id=1,
        memory_total_bytes=42144366592,
        gpm=GpmSpec(sm_util_percent=40.0, dram_bw_util_percent=20.0),
    )
    scenario = with_gpu(load_scenario("h100_sxm_8x_gpm"), 0, mig=(instance,))
    clock = FakeClock()
    with install_fake_nvml(scenario, clock) as fake:
        source = NvmlSource(SourceSettings(), monotonic=clock, sleep=clock.sleep)
        assert source.discover()[1].mig_profile == "3g.40gb"
        samples = by_uuid(source.read(NOW))
        source.close()
    mig = samples[instance.uuid]
    assert mig.sm_activity == pytest.approx(0.4, rel=1e-9)
    assert mig.dram_activity == pytest.approx(0.2, rel=1e-9)
    assert not mig.activity_coarse and mig.power_watts is None
    assert len(fake.gpm_sample_times[(0, 1)]) == 2  # nvmlGpmMigSampleGet(parent, GI 1)
    assert samples[H100_0].sm_activity == pytest.approx(0.875, rel=1e-9)


def test_memory_the_driver_cannot_say_is_none_not_a_huge_number() -> None:
    not_available = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value  # WDDM's answer
    processes = (ProcessSpec(pid=41, used_memory_bytes=not_available, sm_util_percent=30),)
    scenario = with_gpu(load_scenario("h100_sxm_8x_gpm"), 0, processes=processes)
    with install_fake_nvml(scenario, FakeClock()):
        source = NvmlSource(SourceSettings())
        [process] = source.read(NOW)[0].processes
        source.close()
    assert (process.pid, process.used_memory_bytes) == (41, None)
