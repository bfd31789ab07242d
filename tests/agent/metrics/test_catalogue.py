"""The agent's metric catalogue: what the exporter emits is exactly what the catalogue says."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from agent.metrics.catalogue import CATALOGUE, GPU_LABELS, spec_by_name
from agent.metrics.dcgm_fields import DCGM_METRICS
from agent.metrics.exporter import AgentExporter
from agent.stats import AgentStats
from gpufleet.metric_spec import MetricSpec
from tests.agent.metrics.test_exporter import (
    INFOS,
    FakeSampler,
    busy_h100,
    fleet_samples,
    fleet_stats,
    scrape_text,
)

UNITS = {
    "watts",
    "joules",
    "ratio",
    "celsius",
    "bytes",
    "hertz",
    "seconds",
    "bytes_per_second",
    "cores",
}
#: Prometheus target labels and dcgm-exporter's workload labels: ours must not clash
RESERVED_LABELS = {"instance", "job", "pod", "namespace", "container", "exported_pod"}


def everything_text(dcgm: bool) -> str:
    """The fixture fleet plus a sample of an unknown GPU, so error counters appear too."""
    sampler = FakeSampler(INFOS, [*fleet_samples(), busy_h100("GPU-unknown")])
    exporter = AgentExporter(
        "node-a", sampler.snapshot, fleet_stats(), dcgm, hosts=sampler.host_snapshot
    )
    return scrape_text(exporter)


def emitted_families(text: str) -> dict[str, tuple[str, set[frozenset[str]]]]:
    """sample name -> (exposed TYPE, the label-name sets seen)."""
    out: dict[str, tuple[str, set[frozenset[str]]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            _, label_sets = out.setdefault(sample.name, (family.type, set()))
            label_sets.add(frozenset(sample.labels))
    return out


@pytest.mark.parametrize("dcgm", [False, True])
def test_every_emitted_gpufleet_family_is_catalogued_with_its_labels(dcgm: bool) -> None:
    families = emitted_families(everything_text(dcgm))
    gpufleet = {name: v for name, v in families.items() if name.startswith("gpufleet_")}
    assert gpufleet
    for name, (typ, label_sets) in gpufleet.items():
        spec = spec_by_name(name)
        assert label_sets == {frozenset(spec.labels)}, name
        assert typ == ("gauge" if spec.type == "info" else spec.type), name
    others = families.keys() - gpufleet.keys()
    assert all(name.startswith("DCGM_") for name in others) and (bool(others) == dcgm)


def test_every_catalogue_row_is_emitted_by_the_fixture_fleet() -> None:
    families = emitted_families(everything_text(dcgm=False))
    assert {spec.name for spec in CATALOGUE} - families.keys() == set()


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda spec: spec.name)
def test_names_follow_prometheus_conventions(spec: MetricSpec) -> None:
    assert re.fullmatch(r"gpufleet_(gpu|agent|workload)_[a-z][a-z0-9_]*[a-z0-9]", spec.name)
    assert spec.name.endswith("_total") == (spec.type == "counter")
    assert spec.name.endswith("_info") == (spec.type == "info")
    base = spec.name.removesuffix("_total")
    if spec.unit:
        assert spec.unit in UNITS
        assert base.endswith("_" + spec.unit)
    else:
        assert not any(base.endswith("_" + unit) for unit in UNITS), spec.name
    assert spec.help.rstrip().endswith(".")


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda spec: spec.name)
def test_labels_are_valid_and_never_clash_with_target_labels(spec: MetricSpec) -> None:
    assert len(set(spec.labels)) == len(spec.labels)
    for label in spec.labels:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", label), label
    assert not RESERVED_LABELS & set(spec.labels)
    assert "node" in spec.labels


def test_names_are_unique_in_both_catalogues() -> None:
    names = [spec.name for spec in CATALOGUE]
    assert len(names) == len(set(names))
    dcgm = [spec.name for spec in DCGM_METRICS]
    assert len(dcgm) == len(set(dcgm))
    assert all(re.fullmatch(r"DCGM_FI_(DEV|PROF)_[A-Z0-9_]+", name) for name in dcgm)


def test_spec_by_name_names_the_unknown_metric() -> None:
    assert spec_by_name("gpufleet_gpu_power_watts").unit == "watts"
    with pytest.raises(KeyError, match="gpufleet_gpu_power_kilowatts"):
        spec_by_name("gpufleet_gpu_power_kilowatts")


#: sample field -> the family that reports it (written out here, not taken from the exporter)
FIELD_FAMILIES = {
    "power_watts": "gpufleet_gpu_power_watts",
    "energy_joules": "gpufleet_gpu_energy_joules_total",
    "sm_occupancy": "gpufleet_gpu_sm_occupancy_ratio",
    "tensor_activity": "gpufleet_gpu_tensor_activity_ratio",
    "temperature_celsius": "gpufleet_gpu_temperature_celsius",
    "memory_temperature_celsius": "gpufleet_gpu_memory_temperature_celsius",
    "memory_used_bytes": "gpufleet_gpu_memory_used_bytes",
    "memory_reserved_bytes": "gpufleet_gpu_memory_reserved_bytes",
    "sm_clock_hertz": "gpufleet_gpu_sm_clock_hertz",
    "memory_clock_hertz": "gpufleet_gpu_memory_clock_hertz",
    "throttle_reasons": "gpufleet_gpu_throttle_reason",
    "ecc_corrected_total": "gpufleet_gpu_ecc_errors_total",
    "remapped_rows_correctable": "gpufleet_gpu_remapped_rows",
    "remapped_rows_pending": "gpufleet_gpu_remapped_rows_pending",
    "encoder_activity": "gpufleet_gpu_encoder_utilization_ratio",
    "decoder_activity": "gpufleet_gpu_decoder_utilization_ratio",
    "pcie_rx_bytes_per_second": "gpufleet_gpu_pcie_throughput_bytes_per_second",
    "nvlink_tx_bytes_per_second": "gpufleet_gpu_nvlink_throughput_bytes_per_second",
    "fp32_activity": "gpufleet_gpu_pipe_activity_ratio",
    "pcie_link_width": "gpufleet_gpu_pcie_link_width",
    "pcie_link_generation_max": "gpufleet_gpu_pcie_link_generation_max",
    "pcie_replays_total": "gpufleet_gpu_pcie_replays_total",
    "fan_speed_ratio": "gpufleet_gpu_fan_speed_ratio",
    "retired_pages_total": "gpufleet_gpu_retired_pages_total",
    "retired_pages_pending": "gpufleet_gpu_retired_pages_pending",
    "sm_clock_default_hertz": "gpufleet_gpu_sm_clock_default_hertz",
}


@settings(max_examples=40, deadline=None)
@given(known=st.fixed_dictionaries({field: st.booleans() for field in FIELD_FAMILIES}))
def test_a_family_has_a_series_exactly_when_its_field_is_known(known: dict[str, bool]) -> None:
    info = INFOS[0]
    unknown = {field: None for field, is_known in known.items() if not is_known}
    unknown["ecc_uncorrected_total"] = None
    unknown["remapped_rows_uncorrectable"] = None
    for partner in ("pcie_tx_bytes_per_second", "nvlink_rx_bytes_per_second"):
        unknown[partner] = None  # the other direction of the same family
    unknown["fp64_activity"] = unknown["fp16_activity"] = None
    sampler = FakeSampler([info], [busy_h100(info.uuid, **unknown)])
    text = scrape_text(AgentExporter("node-a", sampler.snapshot, AgentStats()))
    emitted = {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }
    for field, family in FIELD_FAMILIES.items():
        assert (family in emitted) == known[field], field


def test_gpu_labels_put_identity_before_workload() -> None:
    assert GPU_LABELS[:3] == ("node", "gpu", "uuid")
    assert GPU_LABELS[-4:] == (
        "k8s_namespace_name",
        "k8s_pod_name",
        "k8s_container_name",
        "slurm_job_id",
    )
