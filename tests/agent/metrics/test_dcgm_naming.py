"""dcgm-compat in dcgm-exporter's 4.9 naming (DCGM 4.7 field names and units), the default,
against the 4.8 naming of the same samples."""

from __future__ import annotations

import re

import pytest

from agent.config import ExporterSettings
from agent.metrics.dcgm_fields import DCGM_METRICS
from agent.metrics.dcgm_naming import RENAMES_4_9, UNVERIFIED_4_9, dcgm_specs
from agent.metrics.exporter import AgentExporter
from agent.stats import AgentStats
from gpufleet.settings import ConfigError
from tests.agent.metrics.test_exporter import (
    GIB,
    INFOS,
    MIB,
    FakeSampler,
    Series,
    fleet_exporter,
    fleet_samples,
    one,
    parse,
    scrape_text,
    values,
)


@pytest.fixture(scope="module")
def v49() -> Series:
    return parse(scrape_text(fleet_exporter(dcgm_compat=True, dcgm_naming="4.9")))


@pytest.fixture(scope="module")
def v48() -> Series:
    return parse(scrape_text(fleet_exporter(dcgm_compat=True, dcgm_naming="4.8")))


def test_the_naming_nvidias_dashboard_queries_is_the_default() -> None:
    """dcgm-compat's promise is that dashboards built for dcgm-exporter work unmodified, and
    NVIDIA's own dashboard queries the 4.8 names; 4.9 is opt-in."""
    assert ExporterSettings().dcgm_naming == "4.8"
    sampler = FakeSampler(INFOS, fleet_samples())
    text = scrape_text(AgentExporter("node-a", sampler.snapshot, AgentStats(), dcgm_compat=True))
    assert "DCGM_FI_DEV_POWER_USAGE{" in text and "DCGM_FI_DEV_BOARD_POWER_WATTS{" not in text


def test_an_unknown_naming_is_a_config_error_naming_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"exporter\.dcgm_naming.*'4\.7'"):
        ExporterSettings(dcgm_naming="4.7")  # type: ignore[arg-type]


def test_units_that_changed_are_si_units_from_the_sample(v49: Series) -> None:
    gpu0 = {"UUID": "GPU-0000"}
    assert one(v49, "DCGM_FI_DEV_SM_CLOCK_HERTZ", **gpu0) == 1.98e9
    assert one(v49, "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", **gpu0) == 2.619e9
    assert one(v49, "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", **gpu0) == 123_456.789
    assert one(v49, "DCGM_FI_DEV_GPU_UTIL_RATIO", **gpu0) == 0.75
    assert one(v49, "DCGM_FI_DEV_FAN_SPEED_RATIO", **gpu0) == 0.4375


def test_renamed_fields_keep_their_values(v49: Series, v48: Series) -> None:
    for old, rename in RENAMES_4_9.items():
        if rename.unit is None and old != "DCGM_FI_DEV_XID_ERRORS":
            assert values(v49, rename.name, UUID="GPU-0000") == values(v48, old, UUID="GPU-0000")
    assert one(v49, "DCGM_FI_PROF_TENSOR_UTIL_RATIO", UUID="GPU-0000") == 0.25
    assert one(v49, "DCGM_FI_DEV_PCIE_REPLAY_TOTAL", UUID="GPU-0000") == 2


def test_bottleneck_signals_in_both_namings(v49: Series, v48: Series) -> None:
    gpu0 = {"UUID": "GPU-0000"}
    for series in (v48, v49):  # unchanged names across the two
        assert one(series, "DCGM_FI_PROF_PCIE_TX_BYTES", **gpu0) == 512 * MIB
        assert one(series, "DCGM_FI_PROF_PCIE_RX_BYTES", **gpu0) == 6 * GIB
        assert one(series, "DCGM_FI_PROF_NVLINK_TX_BYTES", **gpu0) == 100 * GIB
        assert one(series, "DCGM_FI_PROF_NVLINK_RX_BYTES", **gpu0) == 96 * GIB
        assert one(series, "DCGM_FI_DEV_PCIE_LINK_WIDTH", **gpu0) == 8
        assert one(series, "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", **gpu0) == 16
    assert one(v48, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", **gpu0) == 0.0625
    assert one(v49, "DCGM_FI_PROF_FP32_UTIL_RATIO", **gpu0) == 0.125
    assert one(v48, "DCGM_FI_DEV_FAN_SPEED", **gpu0) == 43.75  # %
    assert one(v48, "DCGM_FI_DEV_RETIRED_PENDING", **gpu0) == 0
    assert one(v49, "DCGM_FI_DEV_PAGE_RETIRED_PENDING", **gpu0) == 0


def test_board_fields_appear_once_per_physical_gpu_not_per_mig_instance(v49: Series) -> None:
    assert values(v49, "DCGM_FI_PROF_PCIE_TX_BYTES", gpu="4") == []  # the fixture's MIG GPU
    assert all(
        "GPU_I_PROFILE" not in dict(labels)
        for name, labels in v49
        if name.startswith(("DCGM_FI_DEV_PCIE", "DCGM_FI_PROF_PCIE"))
    )


def test_labels_follow_the_newer_template(v49: Series) -> None:
    [labels] = [
        dict(k) for n, k in v49 if n == "DCGM_FI_DEV_BOARD_POWER_WATTS" and ("gpu", "0") in k
    ]
    assert labels["hostname"] == "node-a" and "Hostname" not in labels
    assert labels["DCGM_FI_SYSTEM_DRIVER_VERSION"] == "580.65.06"
    assert "DCGM_FI_DRIVER_VERSION" not in labels


def test_no_4_8_name_leaks_into_4_9_unless_unverified(v49: Series) -> None:
    renamed = set(RENAMES_4_9)
    emitted = {name for name, _ in v49 if name.startswith("DCGM_")}
    assert not emitted & renamed
    kept = {spec.name for spec in DCGM_METRICS} - renamed
    assert kept >= UNVERIFIED_4_9
    assert {spec.name for spec in dcgm_specs("4.9")} == (
        kept | {r.name for r in RENAMES_4_9.values()}
    )


def test_every_4_9_series_has_exactly_its_spec_labels() -> None:
    text = scrape_text(fleet_exporter(dcgm_compat=True, dcgm_naming="4.9"))
    specs = {spec.name: spec for spec in dcgm_specs("4.9")}
    seen = 0
    for line in text.splitlines():
        if line.startswith("DCGM_"):
            name = line.split("{", 1)[0]
            labels = re.findall(r'([A-Za-z_]\w*)="', line.split("{", 1)[1])
            assert sorted(labels) == sorted(specs[name].labels), line
            seen += 1
    assert seen > 50
