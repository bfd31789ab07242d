"""--dcgm-compat with dcgm_naming 4.8: dcgm-exporter 4.8.x names, units and labels from our
samples (the 4.9 naming: test_dcgm_naming.py)."""

from __future__ import annotations

import csv
import json
import re

import httpx
import msgspec
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)

from agent.metrics.dcgm_fields import DCGM_LABELS, DCGM_METRICS, UNSUPPORTED
from agent.metrics.exporter import AgentExporter, serve_metrics
from agent.model import GpuSample, ProcessSample
from agent.stats import AgentStats
from tests.agent.metrics.test_exporter import (
    GIB,
    INFOS,
    JOB,
    MIB,
    NOW,
    POD_A,
    POD_B,
    FakeSampler,
    busy_h100,
    fleet_exporter,
    fleet_samples,
    one,
    parse,
    scrape_text,
    values,
)
from tests.paths import FIXTURES

# verbatim copies of NVIDIA's files (see SOURCE.md there), so a fresh clone has them
REFERENCE = FIXTURES / "reference"
CSV_PATH = REFERENCE / "dcgm-default-counters.csv"
DASHBOARD_PATH = REFERENCE / "dcgm-exporter-dashboard.json"


@pytest.fixture(scope="module")
def series() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return parse(scrape_text(fleet_exporter(dcgm_compat=True)))


def test_units_are_dcgm_units(series: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> None:
    gpu0 = {"UUID": "GPU-0000"}
    assert one(series, "DCGM_FI_DEV_SM_CLOCK", **gpu0) == 1980  # MHz
    assert one(series, "DCGM_FI_DEV_MEM_CLOCK", **gpu0) == 2619
    assert one(series, "DCGM_FI_DEV_POWER_USAGE", **gpu0) == 512.5  # W
    energy = one(series, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **gpu0)
    assert energy == pytest.approx(123_456_789)  # mJ
    assert one(series, "DCGM_FI_DEV_GPU_TEMP", **gpu0) == 61
    assert one(series, "DCGM_FI_DEV_MEMORY_TEMP", **gpu0) == 70
    assert one(series, "DCGM_FI_DEV_GPU_UTIL", **gpu0) == 75  # %
    assert one(series, "DCGM_FI_DEV_MEM_COPY_UTIL", **gpu0) == 62.5
    assert one(series, "DCGM_FI_DEV_ENC_UTIL", **gpu0) == 12.5
    assert one(series, "DCGM_FI_DEV_DEC_UTIL", **gpu0) == 37.5
    assert one(series, "DCGM_FI_DEV_FB_USED", **gpu0) == 40 * 1024  # MiB
    assert one(series, "DCGM_FI_DEV_FB_RESERVED", **gpu0) == 512
    assert one(series, "DCGM_FI_DEV_FB_FREE", **gpu0) == 80 * 1024 - 40 * 1024 - 512
    assert one(series, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", **gpu0) == 0.75  # ratio
    assert one(series, "DCGM_FI_PROF_SM_ACTIVE", **gpu0) == 0.75
    assert one(series, "DCGM_FI_PROF_SM_OCCUPANCY", **gpu0) == 0.5
    assert one(series, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", **gpu0) == 0.25
    assert one(series, "DCGM_FI_PROF_DRAM_ACTIVE", **gpu0) == 0.625
    assert one(series, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", **gpu0) == 0x44
    assert one(series, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", **gpu0) == 3
    assert one(series, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", **gpu0) == 1


def test_memory_info_v1_free_is_total_minus_used(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    assert one(series, "DCGM_FI_DEV_FB_FREE", UUID="GPU-1111") == 80 * 1024 - 1024
    assert values(series, "DCGM_FI_DEV_FB_RESERVED", UUID="GPU-1111") == []


def test_coarse_counters_never_pose_as_sm_active(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    assert one(series, "DCGM_FI_DEV_GPU_UTIL", UUID="GPU-1111") == 0
    assert values(series, "DCGM_FI_PROF_SM_ACTIVE", UUID="GPU-1111") == []
    assert values(series, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", UUID="GPU-1111") == []
    assert values(series, "DCGM_FI_DEV_MEMORY_TEMP", UUID="GPU-1111") == []


def test_gpu_labels_follow_dcgm_template(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    labels = {
        "gpu": "0",
        "UUID": "GPU-0000",
        "pci_bus_id": "00000000:18:00.0",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "node-a",
        "DCGM_FI_DRIVER_VERSION": "580.65.06",
        "pod": "train-a",
        "namespace": "ml",
        "container": "main",
    }
    power = [dict(k) for (n, k) in series if n == "DCGM_FI_DEV_POWER_USAGE" and ("gpu", "0") in k]
    assert power == [labels]


def test_mig_instances_use_parent_identity_and_stay_distinct(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    used = [dict(k) for (n, k) in series if n == "DCGM_FI_DEV_FB_USED" and ("gpu", "4") in k]
    profiles = sorted(labels.get("GPU_I_PROFILE", "") for labels in used)
    assert profiles == ["2g.20gb", "2g.20gb", "3g.40gb"]
    assert {labels["UUID"] for labels in used} == {"GPU-4444"}
    assert {labels["pci_bus_id"] for labels in used} == {"00000000:1C:00.0"}
    assert len({labels["GPU_I_ID"] for labels in used}) == 3
    held = one(series, "DCGM_FI_DEV_FB_USED", GPU_I_PROFILE="3g.40gb")
    assert held == 10 * 1024
    assert one(series, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", GPU_I_PROFILE="3g.40gb", pod="train-b")
    # DCGM does not report the DEV_*_UTIL fields on MIG instances; neither do we
    assert values(series, "DCGM_FI_DEV_GPU_UTIL", gpu="4") == []
    # device-level power appears once for the physical GPU, not once per instance
    assert values(series, "DCGM_FI_DEV_POWER_USAGE", gpu="4") == [180.0]


def test_xid_errors_is_the_last_xid_with_its_code(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    xid = one(series, "DCGM_FI_DEV_XID_ERRORS", UUID="GPU-3333", err_code="13")
    assert xid == 13
    assert one(series, "DCGM_FI_DEV_XID_ERRORS", UUID="GPU-0000") == 0
    # a lost GPU cannot say whether it had an XID
    assert values(series, "DCGM_FI_DEV_XID_ERRORS", UUID="GPU-2222") == []
    assert values(series, "DCGM_FI_DEV_POWER_USAGE", UUID="GPU-2222") == []


def test_slurm_job_becomes_hpc_job() -> None:
    info = INFOS[0]
    sampler = FakeSampler([info], [busy_h100(info.uuid, workloads=(JOB,))])
    exporter = AgentExporter(
        "node-a", sampler.snapshot, AgentStats(), dcgm_compat=True, dcgm_naming="4.8"
    )
    series = parse(scrape_text(exporter))
    assert one(series, "DCGM_FI_DEV_GPU_TEMP", hpc_job="4242") == 61
    labels = next(dict(k) for (n, k) in series if n == "DCGM_FI_DEV_GPU_TEMP")
    assert "pod" not in labels


def test_every_field_is_emitted_by_the_fixture_fleet(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    emitted = {name for name, _ in series}
    assert {spec.name for spec in DCGM_METRICS} <= emitted


def test_every_dcgm_series_has_exactly_its_spec_labels() -> None:
    text = scrape_text(fleet_exporter(dcgm_compat=True))
    specs = {spec.name: spec for spec in DCGM_METRICS}
    seen = 0
    for line in text.splitlines():
        if line.startswith("DCGM_"):
            name = line.split("{", 1)[0]
            labels = re.findall(r'([A-Za-z_]\w*)="', line.split("{", 1)[1])
            assert sorted(labels) == sorted(specs[name].labels), line
            seen += 1
    assert seen > 50


def _csv_rows(include_commented: bool) -> dict[str, tuple[str, str]]:
    """DCGM field -> (type, help) from the default counters file."""
    rows: dict[str, tuple[str, str]] = {}
    for line in CSV_PATH.read_text().splitlines():
        commented = line.lstrip().startswith("#")
        body = line.lstrip().lstrip("#").strip()
        if not body.startswith("DCGM_") or (commented and not include_commented):
            continue
        field, typ, help_text = next(csv.reader([body], skipinitialspace=True))
        rows[field.strip()] = (typ.strip(), help_text.strip())
    return rows


def test_every_default_counter_is_emitted_or_explained() -> None:
    active = _csv_rows(include_commented=False)
    ours = {spec.name for spec in DCGM_METRICS}
    labels_only = {name for name, (typ, _) in active.items() if typ == "label"}
    assert labels_only == {"DCGM_FI_DRIVER_VERSION"} <= set(DCGM_LABELS)
    for name in active.keys() - labels_only:
        assert (name in ours) != (name in UNSUPPORTED), name
    assert set(UNSUPPORTED) <= active.keys()
    assert all(UNSUPPORTED.values())


def test_types_and_help_match_the_default_counters_file() -> None:
    rows = _csv_rows(include_commented=True)
    for spec in DCGM_METRICS:
        if spec.name in rows:
            assert (spec.type, spec.help) == rows[spec.name], spec.name


def _dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD_PATH.read_text())
    queries: list[str] = []

    def walk(panels: list[dict[str, object]]) -> None:
        for panel in panels:
            walk(panel.get("panels", []))  # type: ignore[arg-type]
            targets = panel.get("targets", [])
            queries.extend(t["expr"] for t in targets if t.get("expr"))  # type: ignore[union-attr]

    walk(board["panels"])
    queries.extend(v["query"] for v in board["templating"]["list"] if v["type"] == "query")
    return queries


def test_nvidia_dashboard_queries_find_our_series(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    queries = _dashboard_queries()
    assert len(queries) >= 10
    target_labels = {"instance", "job"}  # added by Prometheus at scrape time
    for query in queries:
        names = set(re.findall(r"\bDCGM_[A-Z0-9_]+\b", query))
        assert names, query
        used = set(re.findall(r"([A-Za-z_]\w*)\s*=~?", query)) | set(
            re.findall(r"label_values\(\s*\w+\s*,\s*(\w+)\s*\)", query)
        )
        for name in names:
            found = [dict(labels) for n, labels in series if n == name]
            assert found, f"{name} (from {query!r}) not emitted"
            for label in used - target_labels:
                assert all(label in labels for labels in found), (name, label)


def test_dashboard_sm_clock_panel_shows_hertz(
    series: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> None:
    (expr,) = [q for q in _dashboard_queries() if "DCGM_FI_DEV_SM_CLOCK" in q]
    factor = float(expr.split("*")[1])
    assert one(series, "DCGM_FI_DEV_SM_CLOCK", UUID="GPU-0000") * factor == 1.98e9


def test_served_over_http_in_both_exposition_formats() -> None:
    registry = CollectorRegistry(auto_describe=True)
    sampler = FakeSampler(INFOS, fleet_samples())
    registry.register(
        AgentExporter("node-a", sampler.snapshot, AgentStats(), dcgm_compat=True, dcgm_naming="4.8")
    )
    server, thread = serve_metrics(registry, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        plain = httpx.get(url, timeout=5).text
        om = httpx.get(
            url, headers={"Accept": "application/openmetrics-text; version=1.0.0"}, timeout=5
        ).text
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert one(parse(plain), "DCGM_FI_DEV_POWER_USAGE", UUID="GPU-0000") == 512.5
    names = {s.name for family in openmetrics_families(om) for s in family.samples}
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in names
    assert "gpufleet_gpu_energy_joules_total" in names
    assert "gpufleet_gpu_info" in names


def test_one_unit_conversion_per_field() -> None:
    """MiB are whole MiB, as DCGM reports them; a partial MiB is not rounded up."""
    info = INFOS[0]
    sample: GpuSample = busy_h100(info.uuid, NOW, memory_used_bytes=5 * MIB + 1)
    sampler = FakeSampler([info], [sample])
    exporter = AgentExporter(
        "node-a", sampler.snapshot, AgentStats(), dcgm_compat=True, dcgm_naming="4.8"
    )
    series = parse(scrape_text(exporter))
    assert one(series, "DCGM_FI_DEV_FB_USED") == 5
    assert one(series, "gpufleet_gpu_memory_used_bytes") == 5 * MIB + 1
    assert one(series, "DCGM_FI_DEV_FB_FREE") == (80 * GIB - 5 * MIB - 1 - 512 * MIB) // MIB


def test_each_pod_on_a_shared_gpu_gets_its_own_values_not_copies() -> None:
    """dcgm-exporter#432: on a time-sliced or MPS GPU every pod got the GPU's figures."""
    info = INFOS[0]
    a, b = (msgspec.structs.replace(w, gpu_sharing="time_slicing") for w in (POD_A, POD_B))
    processes = (
        ProcessSample(pid=10, sm_share=0.5, used_memory_bytes=20 * GIB, workload=a),
        ProcessSample(pid=11, sm_share=0.2, used_memory_bytes=4 * GIB, workload=a),
        ProcessSample(pid=12, sm_share=0.0, used_memory_bytes=6 * GIB, workload=b),
    )
    sample = busy_h100(info.uuid, workloads=(a, b), processes=processes)
    exporter = AgentExporter("node-a", FakeSampler([info], [sample]).snapshot, AgentStats(),
                             dcgm_compat=True)  # fmt: skip
    series = parse(scrape_text(exporter))
    assert one(series, "DCGM_FI_DEV_GPU_UTIL", pod="train-a") == pytest.approx(70.0)
    assert one(series, "DCGM_FI_DEV_GPU_UTIL", pod="train-b") == 0.0
    assert one(series, "DCGM_FI_DEV_FB_USED", pod="train-a") == 24 * GIB // MIB
    assert one(series, "DCGM_FI_DEV_FB_USED", pod="train-b") == 6 * GIB // MIB
    # the board's own figures once, on the primary pod's series: sums never double count
    assert values(series, "DCGM_FI_DEV_POWER_USAGE") == [sample.power_watts]
    assert one(series, "DCGM_FI_DEV_POWER_USAGE", pod="train-a") == sample.power_watts
    assert values(series, "DCGM_FI_DEV_FB_FREE") == []
