"""Line protocol for the InfluxDB sink, and its settings section."""

from __future__ import annotations

import pytest

from agent.model import Batch, GpuInfo, GpuSample, Workload, WorkloadKind, encode_batch
from collector.config import CollectorSettings
from collector.influx.points import batch_lines, rollup_lines, timestamp_nanoseconds
from collector.influx.settings import InfluxSettings
from collector.records import Usage, WorkloadRef
from gpufleet.settings import ConfigError, load_settings

POD = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid-1", namespace="ml", name="train 1")
JOB = Workload(kind=WorkloadKind.SLURM_JOB, id="77", slurm_job_id="77")


def _batch(*samples: GpuSample) -> Batch:
    return Batch(
        schema_version=1,
        node="node-1",
        agent_boot_id="boot",
        seq=1,
        sent_at=0.0,
        gpus=(GpuInfo(uuid="GPU-a", index=0, name="NVIDIA H100 80GB HBM3"),),
        samples=samples,
    )


def test_sample_line_has_tags_si_fields_and_nanoseconds() -> None:
    sample = GpuSample(
        timestamp=1_700_000_000.25,
        gpu_uuid="GPU-a",
        sm_activity=0.5,
        power_watts=312.5,
        energy_joules=1_234_567.875,
        memory_used_bytes=80 * 2**30,
        workloads=(POD, JOB),
    )
    [line] = batch_lines(encode_batch(_batch(sample)))
    assert line == (
        r"gpu,model=NVIDIA\ H100\ 80GB\ HBM3,node=node-1,uuid=GPU-a,"
        r"workload=pod:ml/train\ 1\,slurm:77 "
        "energy_joules=1234567.875,healthy=true,memory_used_bytes=85899345920i,"
        "power_watts=312.5,sm_activity=0.5 "
        "1700000000250000000"
    )


def test_unknown_readings_are_left_out_and_every_sample_is_one_point() -> None:
    lost = GpuSample(timestamp=1_700_000_001.0, gpu_uuid="GPU-a", healthy=False, error="lost")
    idle = GpuSample(timestamp=1_700_000_002.0, gpu_uuid="GPU-a", sm_activity=0.0)
    lines = batch_lines(encode_batch(_batch(lost, idle)))
    assert lines == [
        "gpu,model=NVIDIA\\ H100\\ 80GB\\ HBM3,node=node-1,uuid=GPU-a healthy=false "
        "1700000001000000000",
        # 0.0 is a reading, not "unknown": it is written; no holder = no workload tag
        "gpu,model=NVIDIA\\ H100\\ 80GB\\ HBM3,node=node-1,uuid=GPU-a healthy=true,"
        "sm_activity=0 1700000002000000000",
    ]


def test_rollup_line_carries_the_hour_totals_at_the_hour_start() -> None:
    ref = WorkloadRef(key="pod:ml/nb", kind="kubernetes_pod", name="nb", namespace="ml")
    usage = Usage(idle_seconds=3600.0, energy_joules=216_000.0, cost=2.5, carbon_grams=28.8)
    [line] = rollup_lines(1_700_002_800.0, [(ref, usage)], "EUR")
    assert line == (
        "workload_hour,currency=EUR,kind=kubernetes_pod,namespace=ml,workload=pod:ml/nb "
        "active_seconds=0,carbon_grams=28.8,cost=2.5,energy_joules=216000,idle_cost=0,"
        "idle_energy_joules=0,idle_seconds=3600,unknown_seconds=0 1700002800000000000"
    )


@pytest.mark.parametrize(
    ("seconds", "nanoseconds"),
    [
        (0.0, 0),
        (1_700_000_000.0, 1_700_000_000_000_000_000),
        (1_700_000_000.001, 1_700_000_000_001_000_000),
        (1_700_000_000.5, 1_700_000_000_500_000_000),
        (4_102_444_800.999, 4_102_444_800_999_000_000),
    ],
)
def test_timestamps_are_exact_to_the_millisecond(seconds: float, nanoseconds: int) -> None:
    assert abs(timestamp_nanoseconds(seconds) - nanoseconds) < 1000


def test_settings_from_the_environment_for_influxdb_2_and_3() -> None:
    v2 = load_settings(
        CollectorSettings,
        None,
        {
            "GPUFLEET_INFLUX__URL": "http://influx:8086",
            "GPUFLEET_INFLUX__TOKEN": "s3cret-token",
            "GPUFLEET_INFLUX__ORG": "acme",
            "GPUFLEET_INFLUX__BUCKET": "gpus",
        },
    ).influx
    assert (v2.enabled, v2.version, v2.org, v2.bucket, v2.token) == (
        True, 2, "acme", "gpus", "s3cret-token",
    )  # fmt: skip
    assert "s3cret-token" not in repr(v2)
    v3 = load_settings(
        CollectorSettings,
        None,
        {"GPUFLEET_INFLUX__URL": "https://influx3:8181", "GPUFLEET_INFLUX__DATABASE": "fleet"},
    ).influx
    assert (v3.version, v3.database) == (3, "fleet")
    assert not CollectorSettings().influx.enabled


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"URL": "http://x:8086", "ORG": "acme"}, "InfluxDB 2 needs org and bucket"),
        ({"URL": "http://x", "BUCKET": "b", "DATABASE": "d"}, "not both"),
        ({"URL": "influx:8086", "DATABASE": "d"}, "influx.url: must start with http"),
        ({"URL": "http://x", "DATABASE": "d", "QUEUE_MAX_POINTS": "0"}, "queue_max_points"),
        ({"URL": "http://x", "DATABASE": "d", "COLOUR": "red"}, "colour"),
    ],
)
def test_bad_settings_name_the_key(env: dict[str, str], message: str) -> None:
    environ = {f"GPUFLEET_INFLUX__{k}": v for k, v in env.items()}
    with pytest.raises(ConfigError, match=message):
        load_settings(CollectorSettings, None, environ)


def test_disabled_settings_need_nothing_else() -> None:
    assert InfluxSettings(org="acme").enabled is False
