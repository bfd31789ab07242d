"""The bottleneck signals (issue 24) through the real binding: GPM on Hopper, byte-counter
fields on Ampere, NotSupported on older GPUs and drivers.

Expected figures are the scenario files' (tests/fixtures/nvml), converted here from NVML's
units (MiB/s, %, MHz) to SI as the agent must.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pynvml
import pytest

from agent.config import SourceSettings
from agent.model import GpuSample
from agent.sources.nvml.fields import SLOW_EVERY_READS
from agent.sources.nvml.source import NvmlSource
from tests.fakes.nvml_lib import FakeClock, FakeNvml, install_fake_nvml, load_scenario
from tests.fakes.nvml_scenario import GpmSpec, MigSpec, Scenario, with_gpu

NOW = 1_750_000_000.0
MIB = 1024 * 1024
H100_0 = "GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000000"
A100_0 = "GPU-a1000000-0000-4000-8000-000000000000"
V100 = "GPU-70000000-0000-4000-8000-000000000000"
L4 = "GPU-14000000-0000-4000-8000-000000000000"


@contextmanager
def running(scenario: str | Scenario) -> Iterator[tuple[NvmlSource, FakeNvml, FakeClock]]:
    clock = FakeClock()
    loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
    with install_fake_nvml(loaded, clock) as fake:
        source = NvmlSource(SourceSettings(), monotonic=clock, sleep=clock.sleep)
        try:
            yield source, fake, clock
        finally:
            source.close()


def reads(source: NvmlSource, clock: FakeClock, count: int) -> list[dict[str, GpuSample]]:
    """``count`` reads one second apart, each as {uuid: sample}."""
    answers = []
    for _ in range(count):
        answers.append({s.gpu_uuid: s for s in source.read(NOW)})
        clock.advance(1.0)
    return answers


def test_hopper_traffic_and_pipes_come_from_gpm() -> None:
    with running("h100_sxm_8x_gpm") as (source, fake, clock):
        sample = reads(source, clock, 1)[0][H100_0]
        asked = {ids for _, ids in fake.field_requests}
    spec = load_scenario("h100_sxm_8x_gpm").gpus[0]
    assert sample.pcie_tx_bytes_per_second == pytest.approx(spec.pcie_tx_mib_per_second * MIB)
    assert sample.pcie_rx_bytes_per_second == pytest.approx(6144 * MIB)
    assert sample.nvlink_tx_bytes_per_second == pytest.approx(102400 * MIB)
    assert sample.nvlink_rx_bytes_per_second == pytest.approx(98304 * MIB)
    assert (sample.fp64_activity, sample.fp32_activity, sample.fp16_activity) == pytest.approx(
        (0.015, 0.125, 0.0625)
    )
    # GPM answers traffic: the byte counters are not asked for
    counters = {
        pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
        pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
    }
    assert all(not counters & set(ids) for ids in asked)


def test_hopper_board_link_replays_and_default_clock() -> None:
    with running("h100_sxm_8x_gpm") as (source, _, clock):
        first = reads(source, clock, 1)[0]
    gpu0, gpu1 = first[H100_0], first["GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000001"]
    assert (gpu0.pcie_link_generation, gpu0.pcie_link_width) == (5, 16)
    assert (gpu0.pcie_link_generation_max, gpu0.pcie_link_width_max) == (5, 16)
    assert (gpu1.pcie_link_width, gpu1.pcie_link_width_max) == (8, 16)  # trained down
    assert gpu0.sm_clock_default_hertz == 1_980_000_000.0
    assert first["GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000003"].pcie_replays_total == 12
    assert gpu0.pcie_replays_total == 0
    # passively cooled, and Hopper remaps rows instead of retiring pages
    assert gpu0.fan_speed_ratio is None
    assert (gpu0.retired_pages_total, gpu0.retired_pages_pending) == (None, None)


def test_ampere_traffic_is_the_byte_counters_delta_over_nvml_time() -> None:
    with running("a100_4x_no_gpm") as (source, fake, clock):
        first, second = (answer[A100_0] for answer in reads(source, clock, 2))
        clock.advance(0.5)  # the counters' timestamps are NVML's: 1.5 s this time
        fake.set_traffic(A100_0, pcie_rx_mib_per_second=1024.0)
        clock.advance(1.0)
        third = {s.gpu_uuid: s for s in source.read(NOW)}[A100_0]
    assert first.pcie_rx_bytes_per_second is None  # a rate needs two readings
    assert second.pcie_tx_bytes_per_second == pytest.approx(256 * MIB, rel=1e-9)
    assert second.pcie_rx_bytes_per_second == pytest.approx(3072 * MIB, rel=1e-9)
    assert second.nvlink_tx_bytes_per_second == pytest.approx(51200 * MIB, rel=1e-6)
    assert second.nvlink_rx_bytes_per_second == pytest.approx(40960 * MIB, rel=1e-6)
    # 1.5 s at 3072 MiB/s, then 1 s at 1024 MiB/s, over 2.5 s
    assert third.pcie_rx_bytes_per_second == pytest.approx((1.5 * 3072 + 1024) / 2.5 * MIB)
    assert second.fp32_activity is None and second.sm_occupancy is None  # no GPM
    assert second.pcie_replays_total == 3


def test_ampere_idle_link_below_its_maximum() -> None:
    with running("a100_4x_no_gpm") as (source, _, clock):
        sample = reads(source, clock, 1)[0]["GPU-a1000000-0000-4000-8000-000000000001"]
    assert (sample.pcie_link_generation, sample.pcie_link_generation_max) == (1, 4)
    assert sample.sm_clock_default_hertz == 1_410_000_000.0


def test_a_counter_that_goes_backwards_gives_no_rate_then_recovers() -> None:
    with running("a100_4x_no_gpm") as (source, fake, clock):
        reads(source, clock, 2)
        fake.reset_traffic_counters(A100_0)  # as a driver reload does
        after_wrap, next_one = (answer[A100_0] for answer in reads(source, clock, 2))
    assert after_wrap.pcie_tx_bytes_per_second is None  # never a negative rate
    assert next_one.pcie_tx_bytes_per_second == pytest.approx(256 * MIB, rel=1e-9)


def test_volta_retired_pages_and_no_counters_on_an_old_driver() -> None:
    with running("old_driver_no_v3") as (source, _, clock):
        first, second = (answer[V100] for answer in reads(source, clock, 2))
    assert (first.retired_pages_total, first.retired_pages_pending) == (3, True)  # 2 + 1
    assert second.retired_pages_total == 3  # remembered between slow reads
    assert second.pcie_tx_bytes_per_second is None and second.nvlink_rx_bytes_per_second is None
    assert (second.pcie_link_generation, second.pcie_replays_total) == (3, 7)
    assert second.sm_clock_default_hertz == 1_312_000_000.0
    assert second.fan_speed_ratio is None


def test_unsupported_signals_are_none_and_dropped_from_the_batch() -> None:
    with running("fields_not_supported") as (source, fake, clock):
        samples = [answer[L4] for answer in reads(source, clock, 3)]
    last = samples[-1]
    assert last.pcie_replays_total is None and last.pcie_tx_bytes_per_second is None
    assert last.retired_pages_total is None and last.fan_speed_ratio is None
    assert last.pcie_link_width == 16  # the link calls answer on Ada
    assert fake.device_calls[("nvmlDeviceGetFanSpeed", L4)] == 1  # not asked again


def test_a_fan_reads_as_a_ratio() -> None:
    scenario = with_gpu(load_scenario("fields_not_supported"), 0, fan_speed_percent=45)
    scenario = with_gpu(scenario, 0, not_supported=frozenset())
    with running(scenario) as (source, _, clock):
        sample = reads(source, clock, 1)[0][L4]
    assert sample.fan_speed_ratio == pytest.approx(0.45)


def test_slow_fields_are_read_once_every_few_reads() -> None:
    with running("old_driver_no_v3") as (source, fake, clock):
        reads(source, clock, 2 * SLOW_EVERY_READS)
    with_retired = [ids for _, ids in fake.field_requests if pynvml.NVML_FI_DEV_RETIRED_SBE in ids]
    assert len(fake.field_requests) == 2 * SLOW_EVERY_READS  # still one batch per read
    assert len(with_retired) == 2
    assert fake.device_calls[("nvmlDeviceGetMaxPcieLinkWidth", V100)] == 2
    assert fake.device_calls[("nvmlDeviceGetDefaultApplicationsClock", V100)] == 2


def test_a_mig_instance_gets_its_pipes_but_not_the_parents_traffic() -> None:
    instance = MigSpec(
        uuid="MIG-h1000000-0000-4000-8000-000000000001",
        profile="3g.40gb",
        gpu_instance_id=1,
        memory_total_bytes=42144366592,
        gpm=GpmSpec(sm_util_percent=40.0, fp32_util_percent=30.0, fp16_util_percent=5.0),
    )
    scenario = with_gpu(load_scenario("h100_sxm_8x_gpm"), 0, mig=(instance,))
    with running(scenario) as (source, fake, clock):
        samples = reads(source, clock, 2)[-1]
    mig, parent = samples[instance.uuid], samples[H100_0]
    assert (mig.fp32_activity, mig.fp16_activity) == pytest.approx((0.3, 0.05))
    assert mig.pcie_rx_bytes_per_second is None and mig.pcie_link_width is None
    assert parent.pcie_rx_bytes_per_second == pytest.approx(6144 * MIB)
    traffic = {
        pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
        pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
    }
    assert any(not traffic & set(ids) for ids in fake.gpm_metric_requests)  # the instance's
