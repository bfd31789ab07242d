"""The node exporter: /metrics content for known GPUs, golden files in both namings."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agent import __version__
from agent.metrics.dcgm_naming import DcgmNaming
from agent.metrics.exporter import AgentExporter, XidTally
from agent.model import (
    GpuInfo,
    GpuSample,
    ProcessSample,
    Workload,
    WorkloadHostSample,
    WorkloadKind,
)
from agent.stats import AgentStats
from tests.paths import FIXTURES

GOLDEN_DIR = FIXTURES / "metrics"
GIB = 1024**3
MIB = 1024**2
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


def _info(index: int, uuid: str, name: str, **kw: object) -> GpuInfo:
    defaults: dict[str, object] = {
        "architecture": "hopper" if name == H100 else "ampere",
        "memory_total_bytes": 80 * GIB,
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "driver_version": "580.65.06",
        "cuda_version": "13.0",
        "power_limit_watts": 700.0 if name == H100 else 400.0,
    }
    defaults.update(kw)
    return GpuInfo(uuid=uuid, index=index, name=name, **defaults)  # type: ignore[arg-type]


POD_A = Workload(
    kind=WorkloadKind.KUBERNETES_POD,
    id="uid-a",
    name="train-a",
    namespace="ml",
    container="main",
)
POD_B = Workload(
    kind=WorkloadKind.KUBERNETES_POD,
    id="uid-b",
    name="train-b",
    namespace="ml",
    container="main",
)
JOB = Workload(kind=WorkloadKind.SLURM_JOB, id="4242", slurm_job_id="4242", user="ada")

INFOS: tuple[GpuInfo, ...] = (
    _info(0, "GPU-0000", H100),
    _info(1, "GPU-1111", A100),
    _info(2, "GPU-2222", H100),
    _info(3, "GPU-3333", H100),
    _info(4, "GPU-4444", A100, mig_enabled=True),
    _info(
        4,
        "MIG-4444-a",
        A100,
        mig_parent_uuid="GPU-4444",
        mig_profile="3g.40gb",
        memory_total_bytes=40 * GIB,
        pci_bus_id=None,
        power_limit_watts=None,
    ),
    *(
        _info(
            4,
            uuid,
            A100,
            mig_parent_uuid="GPU-4444",
            mig_profile="2g.20gb",
            memory_total_bytes=20 * GIB,
            pci_bus_id=None,
            power_limit_watts=None,
        )
        for uuid in ("MIG-4444-b", "MIG-4444-c")
    ),
)


def busy_h100(uuid: str, timestamp: float = NOW, **kw: object) -> GpuSample:
    """A Hopper GPU read through GPM, every field known."""
    fields: dict[str, object] = {
        "sm_activity": 0.75,
        "sm_occupancy": 0.5,
        "tensor_activity": 0.25,
        "dram_activity": 0.625,
        "activity_coarse": False,
        "power_watts": 512.5,
        "energy_joules": 123_456.789,
        "temperature_celsius": 61.0,
        "memory_temperature_celsius": 70.0,
        "memory_used_bytes": 40 * GIB,
        "memory_total_bytes": 80 * GIB,
        "memory_reserved_bytes": 512 * MIB,
        "sm_clock_hertz": 1_980_000_000.0,
        "memory_clock_hertz": 2_619_000_000.0,
        "throttle_reasons": 0x4 | 0x40,
        "ecc_corrected_total": 3,
        "ecc_uncorrected_total": 0,
        "remapped_rows_correctable": 1,
        "remapped_rows_uncorrectable": 0,
        "remapped_rows_pending": False,
        "processes": (ProcessSample(pid=4321, used_memory_bytes=40 * GIB, sm_share=0.75),),
        "encoder_activity": 0.125,
        "decoder_activity": 0.375,
        "pcie_tx_bytes_per_second": 512.0 * MIB,
        "pcie_rx_bytes_per_second": 6.0 * GIB,
        "nvlink_tx_bytes_per_second": 100.0 * GIB,
        "nvlink_rx_bytes_per_second": 96.0 * GIB,
        "fp64_activity": 0.0625,
        "fp32_activity": 0.125,
        "fp16_activity": 0.1875,
        "pcie_link_generation": 5,
        "pcie_link_width": 8,
        "pcie_link_generation_max": 5,
        "pcie_link_width_max": 16,
        "pcie_replays_total": 2,
        "fan_speed_ratio": 0.4375,
        "retired_pages_total": 4,
        "retired_pages_pending": False,
        "sm_clock_default_hertz": 1_755_000_000.0,
    }
    fields.update(kw)
    return GpuSample(timestamp=timestamp, gpu_uuid=uuid, **fields)  # type: ignore[arg-type]


def fleet_samples() -> list[GpuSample]:
    """Deterministic samples for INFOS: one of each case the exporter must handle."""
    return [
        busy_h100("GPU-0000", workloads=(POD_A,)),
        GpuSample(  # pre-Hopper, coarse counters, memory info v1, no HBM temperature
            timestamp=NOW,
            gpu_uuid="GPU-1111",
            sm_activity=0.0,
            dram_activity=0.0,
            activity_coarse=True,
            power_watts=61.25,
            energy_joules=9_000.5,
            temperature_celsius=33.0,
            memory_used_bytes=1 * GIB,
            memory_total_bytes=80 * GIB,
            sm_clock_hertz=210_000_000.0,
            memory_clock_hertz=1_593_000_000.0,
            throttle_reasons=0x1,
            remapped_rows_pending=True,
        ),
        GpuSample(timestamp=NOW, gpu_uuid="GPU-2222", healthy=False, error="GPU is lost"),
        busy_h100("GPU-3333", xid_errors=(13,), workloads=(JOB, POD_B, POD_A)),
        GpuSample(  # MIG parent: device-level fields only
            timestamp=NOW,
            gpu_uuid="GPU-4444",
            power_watts=180.0,
            energy_joules=50_000.0,
            temperature_celsius=45.0,
            sm_clock_hertz=1_410_000_000.0,
        ),
        GpuSample(
            timestamp=NOW,
            gpu_uuid="MIG-4444-a",
            sm_activity=0.5,
            dram_activity=0.25,
            memory_used_bytes=10 * GIB,
            memory_total_bytes=40 * GIB,
            workloads=(POD_B,),
        ),
        *(
            GpuSample(
                timestamp=NOW,
                gpu_uuid=uuid,
                sm_activity=0.0,
                dram_activity=0.0,
                memory_used_bytes=0,
                memory_total_bytes=20 * GIB,
            )
            for uuid in ("MIG-4444-b", "MIG-4444-c")
        ),
    ]


#: POD_A read twice, limited; JOB unlimited on cgroup v1 (no PSI); POD_B read once (no rate)
FLEET_HOSTS: tuple[WorkloadHostSample, ...] = (
    WorkloadHostSample(
        timestamp=NOW,
        workload_key=POD_A.key,
        cpu_used_cores=3.75,
        cpu_limit_cores=4.0,
        cpu_throttled_ratio=0.25,
        memory_pressure_ratio=0.0125,
        memory_used_bytes=12 * GIB,
        memory_limit_bytes=64 * GIB,
    ),
    WorkloadHostSample(
        timestamp=NOW, workload_key=JOB.key, cpu_used_cores=10.5, memory_used_bytes=3 * GIB
    ),
    WorkloadHostSample(
        timestamp=NOW, workload_key=POD_B.key, cpu_limit_cores=2.0, memory_used_bytes=GIB
    ),
)


def fleet_stats() -> AgentStats:
    stats = AgentStats()
    stats.record_read(0.25, unhealthy_gpus=1)
    stats.record_read(0.5, unhealthy_gpus=1)
    stats.record_field_error("GPU-2222", "power_watts")
    stats.record_batch_sent(samples=14)
    stats.record_batch_failed()
    stats.set_spool_size(4096, 2)
    stats.record_spool_drop(1, 7)
    stats.record_held("future_timestamp")
    stats.record_refused("invalid_value")
    stats.record_split()
    stats.record_late(3)
    stats.set_retry_after(2.0)
    return stats


class FakeSampler:
    """Holds the sampler's latest state; tests change it between scrapes."""

    def __init__(
        self,
        infos: Sequence[GpuInfo],
        samples: Sequence[GpuSample],
        hosts: Sequence[WorkloadHostSample] = FLEET_HOSTS,
    ) -> None:
        self.infos = list(infos)
        self.samples = list(samples)
        self.hosts = list(hosts)

    def snapshot(self) -> tuple[list[GpuInfo], list[GpuSample]]:
        return self.infos, self.samples

    def host_snapshot(self) -> list[WorkloadHostSample]:
        return self.hosts


def scrape_text(exporter: AgentExporter) -> str:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(exporter)
    return generate_latest(registry).decode()


def fleet_exporter(dcgm_compat: bool = False, dcgm_naming: DcgmNaming = "4.8") -> AgentExporter:
    sampler = FakeSampler(INFOS, fleet_samples())
    return AgentExporter(
        "node-a",
        sampler.snapshot,
        fleet_stats(),
        dcgm_compat=dcgm_compat,
        dcgm_naming=dcgm_naming,
        hosts=sampler.host_snapshot,
    )


Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Series:
    """(sample name, labels) -> value; empty label values dropped, as Prometheus does."""
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = frozenset((k, v) for k, v in s.labels.items() if v != "")
            out[(s.name, labels)] = s.value
    return out


def values(series: Series, name: str, **match: str) -> list[float]:
    """Values of ``name`` whose labels include ``match``."""
    want = set(match.items())
    return [v for (n, labels), v in series.items() if n == name and want <= labels]


def one(series: Series, name: str, **match: str) -> float:
    found = values(series, name, **match)
    assert len(found) == 1, f"{name} {match}: {found}"
    return found[0]


def check_golden(name: str, text: str) -> None:
    text = text.replace(f'version="{__version__}"', 'version="VERSION"')
    path = GOLDEN_DIR / name
    if os.environ.get("GPUFLEET_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with GPUFLEET_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs; rerun with GPUFLEET_UPDATE_GOLDEN=1"


@pytest.mark.parametrize(
    ("dcgm", "naming", "golden"),
    [
        (False, "4.9", "agent.txt"),
        (True, "4.8", "agent_dcgm.txt"),
        (True, "4.9", "agent_dcgm_4_9.txt"),
    ],
)
def test_metrics_text_matches_golden_file(dcgm: bool, naming: DcgmNaming, golden: str) -> None:
    check_golden(golden, scrape_text(fleet_exporter(dcgm_compat=dcgm, dcgm_naming=naming)))


def test_without_dcgm_compat_no_dcgm_names() -> None:
    assert "DCGM_" not in scrape_text(fleet_exporter(dcgm_compat=False))


def test_values_are_the_samples_in_si_units() -> None:
    series = parse(scrape_text(fleet_exporter()))
    assert one(series, "gpufleet_gpu_power_watts", uuid="GPU-0000") == 512.5
    assert one(series, "gpufleet_gpu_energy_joules_total", uuid="GPU-0000") == 123_456.789
    assert one(series, "gpufleet_gpu_sm_clock_hertz", uuid="GPU-0000") == 1.98e9
    assert one(series, "gpufleet_gpu_memory_used_bytes", uuid="GPU-0000") == 40 * GIB
    assert one(series, "gpufleet_gpu_encoder_utilization_ratio", uuid="GPU-0000") == 0.125
    assert one(series, "gpufleet_gpu_decoder_utilization_ratio", uuid="GPU-0000") == 0.375
    assert one(series, "gpufleet_gpu_power_limit_watts", uuid="GPU-1111") == 400.0
    assert one(series, "gpufleet_gpu_activity_coarse", uuid="GPU-1111") == 1.0
    assert one(series, "gpufleet_gpu_activity_coarse", uuid="GPU-0000") == 0.0
    assert one(series, "gpufleet_gpu_process_count", uuid="GPU-0000") == 1.0
    assert one(series, "gpufleet_gpu_last_sample_timestamp_seconds", uuid="GPU-0000") == NOW
    assert one(series, "gpufleet_gpu_ecc_errors_total", uuid="GPU-0000", type="corrected") == 3
    assert one(series, "gpufleet_gpu_remapped_rows_pending", uuid="GPU-1111") == 1.0
    info = one(series, "gpufleet_gpu_info", uuid="GPU-0000", driver_version="580.65.06")
    assert info == 1.0


def test_throttle_reasons_one_series_per_reason() -> None:
    series = parse(scrape_text(fleet_exporter()))
    name = "gpufleet_gpu_throttle_reason"
    active = {
        dict(labels)["reason"]
        for (n, labels), v in series.items()
        if n == name and ("uuid", "GPU-0000") in labels and v == 1.0
    }
    assert active == {"sw_power_cap", "hw_thermal_slowdown"}
    assert len(values(series, name, uuid="GPU-0000")) == 9
    assert one(series, name, uuid="GPU-1111", reason="gpu_idle") == 1.0


def test_none_emits_no_sample_never_zero() -> None:
    series = parse(scrape_text(fleet_exporter()))
    assert values(series, "gpufleet_gpu_memory_temperature_celsius", uuid="GPU-1111") == []
    assert values(series, "gpufleet_gpu_memory_reserved_bytes", uuid="GPU-1111") == []
    assert values(series, "gpufleet_gpu_tensor_activity_ratio", uuid="GPU-1111") == []
    assert values(series, "gpufleet_gpu_ecc_errors_total", uuid="GPU-1111") == []
    # the MIG parent reads no activity: no ratio and no coarse flag either
    assert values(series, "gpufleet_gpu_sm_activity_ratio", uuid="GPU-4444") == []
    assert values(series, "gpufleet_gpu_activity_coarse", uuid="GPU-4444") == []
    # the MIG instance reads no power: it must not inherit anything
    assert values(series, "gpufleet_gpu_power_watts", uuid="MIG-4444-a") == []


def test_unhealthy_gpu_reports_health_and_identity_only() -> None:
    series = parse(scrape_text(fleet_exporter()))
    uuid = "GPU-2222"
    assert one(series, "gpufleet_gpu_healthy", uuid=uuid) == 0.0
    assert one(series, "gpufleet_gpu_healthy", uuid="GPU-0000") == 1.0
    assert one(series, "gpufleet_gpu_info", uuid=uuid) == 1.0
    assert one(series, "gpufleet_gpu_last_sample_timestamp_seconds", uuid=uuid) == NOW
    for name in ("power_watts", "temperature_celsius", "sm_activity_ratio", "process_count"):
        assert values(series, f"gpufleet_gpu_{name}", uuid=uuid) == [], name
    # static facts from discovery stay
    assert one(series, "gpufleet_gpu_memory_total_bytes", uuid=uuid) == 80 * GIB
    assert one(series, "gpufleet_agent_unhealthy_gpus") == 1.0


def test_mig_instances_carry_profile_and_parent() -> None:
    series = parse(scrape_text(fleet_exporter()))
    labels = {"uuid": "MIG-4444-a", "mig_profile": "3g.40gb", "mig_parent_uuid": "GPU-4444"}
    assert one(series, "gpufleet_gpu_sm_activity_ratio", **labels) == 0.5
    assert one(series, "gpufleet_gpu_memory_total_bytes", **labels) == 40 * GIB
    assert one(series, "gpufleet_gpu_info", **labels) == 1.0
    parent = one(series, "gpufleet_gpu_power_watts", uuid="GPU-4444")
    assert parent == 180.0
    assert not values(series, "gpufleet_gpu_power_watts", mig_parent_uuid="GPU-4444")


def test_shared_gpu_one_series_per_gpu_and_one_info_per_workload() -> None:
    series = parse(scrape_text(fleet_exporter()))
    power = [
        (dict(labels), v)
        for (n, labels), v in series.items()
        if n == "gpufleet_gpu_power_watts" and ("uuid", "GPU-3333") in labels
    ]
    assert len(power) == 1
    labels, _ = power[0]
    # pods come first, then by key: ml/train-a before ml/train-b; the Slurm job is not primary
    assert labels["k8s_pod_name"] == "train-a"
    assert labels["k8s_namespace_name"] == "ml"
    assert "slurm_job_id" not in labels
    held = values(series, "gpufleet_gpu_workload_info", uuid="GPU-3333")
    assert held == [1.0, 1.0, 1.0]
    assert one(series, "gpufleet_gpu_workload_info", uuid="GPU-3333", slurm_job_id="4242") == 1
    assert one(series, "gpufleet_gpu_workload_info", workload_key="pod:ml/train-b", gpu="3") == 1


def test_primary_workload_does_not_depend_on_attribution_order() -> None:
    samples = fleet_samples()
    samples[3] = busy_h100("GPU-3333", xid_errors=(13,), workloads=(POD_B, POD_A, JOB))
    assert samples[3].workloads != fleet_samples()[3].workloads
    sampler = FakeSampler(INFOS, samples)
    exporter = AgentExporter("node-a", sampler.snapshot, fleet_stats(), hosts=sampler.host_snapshot)
    assert scrape_text(exporter) == scrape_text(fleet_exporter())


def test_agent_self_metrics_come_from_stats() -> None:
    series = parse(scrape_text(fleet_exporter()))
    assert one(series, "gpufleet_agent_reads_total") == 2
    assert one(series, "gpufleet_agent_read_seconds_total") == 0.75
    assert one(series, "gpufleet_agent_last_read_seconds") == 0.5
    assert one(series, "gpufleet_agent_field_errors_total", uuid="GPU-2222") == 1
    assert one(series, "gpufleet_agent_batches_sent_total") == 1
    assert one(series, "gpufleet_agent_batches_failed_total") == 1
    assert one(series, "gpufleet_agent_samples_sent_total") == 14
    assert one(series, "gpufleet_agent_spool_bytes") == 4096
    assert one(series, "gpufleet_agent_spool_batches") == 2
    assert one(series, "gpufleet_agent_spool_dropped_batches_total") == 1
    assert one(series, "gpufleet_agent_spool_dropped_samples_total") == 7
    assert one(series, "gpufleet_agent_info", version=__version__, node="node-a") == 1


def test_xid_counted_once_per_sample_across_scrapes() -> None:
    info = INFOS[0]
    sampler = FakeSampler([info], [busy_h100(info.uuid, NOW, xid_errors=(79,))])
    exporter = AgentExporter("node-a", sampler.snapshot, AgentStats())
    name = "gpufleet_gpu_xid_errors_total"
    assert one(parse(scrape_text(exporter)), name, xid="79") == 1
    assert one(parse(scrape_text(exporter)), name, xid="79") == 1  # same sample again
    sampler.samples = [busy_h100(info.uuid, NOW + 1, xid_errors=(79, 13))]
    series = parse(scrape_text(exporter))
    assert one(series, name, xid="79") == 2
    assert one(series, name, xid="13") == 1
    sampler.samples = [busy_h100(info.uuid, NOW + 2)]  # no new XID: counts stay
    series = parse(scrape_text(exporter))
    assert one(series, name, xid="79") == 2


def test_xid_tally_fed_by_sampler_keeps_events_between_scrapes() -> None:
    info = INFOS[0]
    tally = XidTally()
    samples = [busy_h100(info.uuid, NOW + t, xid_errors=(31,)) for t in range(5)]
    for sample in samples:  # what the sampler sees every second
        tally.observe(sample)
    sampler = FakeSampler([info], [samples[-1]])  # a scrape sees only the latest
    exporter = AgentExporter("node-a", sampler.snapshot, AgentStats(), xid_tally=tally)
    assert one(parse(scrape_text(exporter)), "gpufleet_gpu_xid_errors_total", xid="31") == 5
    tally.observe(samples[2])  # a late, older sample is not counted again
    assert tally.counts(info.uuid) == {31: 5}
    assert tally.last_xid(info.uuid) == 31


def test_counters_never_decrease_across_scrapes() -> None:
    sampler = FakeSampler(INFOS, fleet_samples())
    exporter = AgentExporter("node-a", sampler.snapshot, fleet_stats())
    previous = parse(scrape_text(exporter))
    for step in range(1, 4):
        sampler.samples = [
            busy_h100("GPU-0000", NOW + step, energy_joules=123_456.789 + 500.0 * step),
            busy_h100("GPU-3333", NOW + step, xid_errors=(13,) * step),
        ]
        current = parse(scrape_text(exporter))
        for key, value in current.items():
            if key[0].endswith("_total") and key in previous:
                assert value >= previous[key], key
        previous = current
    assert one(previous, "gpufleet_gpu_energy_joules_total", uuid="GPU-0000") == 124_956.789
    assert one(previous, "gpufleet_gpu_xid_errors_total", uuid="GPU-3333") == 1 + 1 + 2 + 3


def test_bad_field_skips_that_series_and_counts_it() -> None:
    samples = fleet_samples()
    samples[0] = busy_h100("GPU-0000", power_watts="garbage", temperature_celsius=float("nan"))
    sampler = FakeSampler(INFOS, samples)
    exporter = AgentExporter(
        "node-a", sampler.snapshot, AgentStats(), dcgm_compat=True, dcgm_naming="4.8"
    )
    series = parse(scrape_text(exporter))
    assert values(series, "gpufleet_gpu_power_watts", uuid="GPU-0000") == []
    assert values(series, "gpufleet_gpu_temperature_celsius", uuid="GPU-0000") == []
    assert one(series, "gpufleet_gpu_power_watts", uuid="GPU-1111") == 61.25
    assert one(series, "gpufleet_gpu_sm_clock_hertz", uuid="GPU-0000") == 1.98e9
    errors = "gpufleet_agent_export_errors_total"
    assert one(series, errors, uuid="GPU-0000", metric="gpufleet_gpu_power_watts") == 1
    assert one(series, errors, uuid="GPU-0000", metric="DCGM_FI_DEV_POWER_USAGE") == 1
    assert one(series, errors, uuid="GPU-0000", metric="DCGM_FI_DEV_GPU_TEMP") == 1


def test_failing_snapshot_still_serves_agent_metrics() -> None:
    def broken() -> tuple[list[GpuInfo], list[GpuSample]]:
        raise RuntimeError("sampler state unreadable")

    series = parse(scrape_text(AgentExporter("node-a", broken, fleet_stats(), dcgm_compat=True)))
    assert one(series, "gpufleet_agent_reads_total") == 2
    assert one(series, "gpufleet_agent_export_errors_total", metric="snapshot") == 1
    assert not any(name.startswith("gpufleet_gpu_") for name, _ in series)


def test_sample_without_known_gpu_is_skipped_and_counted() -> None:
    sampler = FakeSampler(INFOS[:1], [busy_h100("GPU-0000"), busy_h100("GPU-ghost")])
    series = parse(scrape_text(AgentExporter("node-a", sampler.snapshot, AgentStats())))
    assert values(series, "gpufleet_gpu_power_watts", uuid="GPU-ghost") == []
    assert one(series, "gpufleet_agent_export_errors_total", uuid="GPU-ghost") == 1


def test_vanished_gpu_disappears() -> None:
    sampler = FakeSampler(INFOS, fleet_samples())
    exporter = AgentExporter("node-a", sampler.snapshot, AgentStats())
    assert "GPU-1111" in scrape_text(exporter)
    sampler.infos = [i for i in INFOS if i.uuid != "GPU-1111"]
    sampler.samples = [s for s in fleet_samples() if s.gpu_uuid != "GPU-1111"]
    assert "GPU-1111" not in scrape_text(exporter)


def test_registering_does_not_read_the_sampler() -> None:
    calls: list[int] = []

    def counting() -> tuple[list[GpuInfo], list[GpuSample]]:
        calls.append(1)
        return [], []

    registry = CollectorRegistry(auto_describe=True)
    registry.register(AgentExporter("node-a", counting, AgentStats(), dcgm_compat=True))
    assert calls == []
    generate_latest(registry)
    assert calls == [1]


def test_host_series_per_workload_with_its_labels_and_none_emits_nothing() -> None:
    series = parse(scrape_text(fleet_exporter()))
    pod_a = {"workload_key": "pod:ml/train-a", "workload_kind": "kubernetes_pod"}
    assert one(series, "gpufleet_workload_host_cpu_cores", **pod_a, k8s_pod_name="train-a") == 3.75
    assert one(series, "gpufleet_workload_host_cpu_limit_cores", **pod_a) == 4.0
    assert one(series, "gpufleet_workload_host_cpu_throttled_ratio", **pod_a) == 0.25
    assert one(series, "gpufleet_workload_host_memory_pressure_ratio", **pod_a) == 0.0125
    assert one(series, "gpufleet_workload_host_memory_limit_bytes", **pod_a) == 64 * GIB
    job = {"workload_key": "slurm:4242", "slurm_job_id": "4242", "workload_kind": "slurm_job"}
    assert one(series, "gpufleet_workload_host_cpu_cores", **job) == 10.5
    for absent in ("cpu_limit_cores", "cpu_throttled_ratio", "memory_pressure_ratio"):
        assert values(series, f"gpufleet_workload_host_{absent}", **job) == []
    # POD_B's first reading: no CPU rate yet, never a 0
    assert values(series, "gpufleet_workload_host_cpu_cores", workload_key="pod:ml/train-b") == []
    assert one(series, "gpufleet_workload_host_memory_used_bytes", k8s_pod_name="train-b") == GIB


def test_host_sample_of_a_workload_no_gpu_names_is_skipped_and_counted() -> None:
    stray = WorkloadHostSample(timestamp=NOW, workload_key="pod:ml/gone", cpu_used_cores=1.0)
    sampler = FakeSampler(INFOS, fleet_samples(), [*FLEET_HOSTS, stray])
    exporter = AgentExporter("node-a", sampler.snapshot, AgentStats(), hosts=sampler.host_snapshot)
    series = parse(scrape_text(exporter))
    assert values(series, "gpufleet_workload_host_cpu_cores", workload_key="pod:ml/gone") == []
    assert len(values(series, "gpufleet_workload_host_cpu_cores")) == 2
    errors = "gpufleet_agent_export_errors_total"
    assert one(series, errors, metric="gpufleet_workload_host") == 1
