"""`gpufleet report` on a ledger a real collector core built from batches as agents POST
them, against what those batches say happened (the truth below, not the code's output).

Three GPUs for two hours, 22:00 to 24:00 UTC, a reading every 10 s:
GPU-a (H100, node n1) held by pod ml/nb, idle, 100 W, with an energy counter;
GPU-b (H100, node n1) held by nobody, idle, 60 W, with an energy counter;
GPU-c (L4, node n2) held by pod cv/det, busy, 70 W (its TDP is 72 W), no counter (energy estimated).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from collector.accounting.rates import Rates
from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.config import CarbonSettings, CollectorSettings
from collector.ledger.store import Ledger
from collector.service import CollectorCore

H22 = 1_767_225_600.0 - 7200  # 2025-12-31T22:00:00Z
H24 = H22 + 7200
STEP = 10
ML = Workload(kind=WorkloadKind.KUBERNETES_POD, id="ml-nb", name="nb", namespace="ml", team="a")
CV = Workload(kind=WorkloadKind.KUBERNETES_POD, id="cv-det", name="det", namespace="cv", team="b")
GPUS = {
    "n1": (GpuInfo(uuid="GPU-a", index=0, name="NVIDIA H100 80GB HBM3"),
           GpuInfo(uuid="GPU-b", index=1, name="NVIDIA H100 80GB HBM3")),
    "n2": (GpuInfo(uuid="GPU-c", index=0, name="NVIDIA L4"),),
}  # fmt: skip
H100 = PriceBook.example().price_per_gpu_hour("H100")
L4 = PriceBook.example().price_per_gpu_hour("L4")
KWH = 3.6e6
#: the truth over 22:00..24:00: GPU-hours idle and known, money, kWh
TRUTH = {
    "idle_gpu_hours": 4.0,
    "gpu_hours": 6.0,
    "waste": 4 * H100,
    "cost": 4 * H100 + 2 * L4,
    "energy_kwh": (100 + 60 + 70) * 7200 / KWH,
    "estimated_energy_kwh": 70 * 7200 / KWH,
}
#: per namespace: (idle GPU-hours, waste, kWh, estimated kWh)
BY_NAMESPACE = {
    "ml": (2.0, 2 * H100, 100 * 7200 / KWH, 0.0),
    "cv": (0.0, 0.0, 70 * 7200 / KWH, 70 * 7200 / KWH),
    "(unallocated)": (2.0, 2 * H100, 60 * 7200 / KWH, 0.0),
}


def reading(gpu: str, t: float) -> GpuSample:
    if gpu == "GPU-a":
        return GpuSample(timestamp=H22 + t, gpu_uuid=gpu, sm_activity=0.0, dram_activity=0.0,
                         power_watts=100.0, energy_joules=100.0 * t, workloads=(ML,))  # fmt: skip
    if gpu == "GPU-b":
        return GpuSample(timestamp=H22 + t, gpu_uuid=gpu, sm_activity=0.0, dram_activity=0.0,
                         power_watts=60.0, energy_joules=60.0 * t)  # fmt: skip
    return GpuSample(timestamp=H22 + t, gpu_uuid=gpu, sm_activity=0.7, dram_activity=0.4,
                     power_watts=70.0, workloads=(CV,))  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "ledger.db"
    rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
    core = CollectorCore.build(CollectorSettings(), Ledger.open(str(path)), rates, lambda: H24)
    seqs = dict.fromkeys(GPUS, 0)
    for first in range(0, 7200 + STEP, 600):  # a batch per node every 10 min, as agents do
        times = range(first, min(first + 600, 7200 + STEP), STEP)
        for node, infos in GPUS.items():
            seqs[node] += 1
            samples = tuple(reading(g.uuid, t) for t in times for g in infos)
            batch = Batch(schema_version=SCHEMA_VERSION, node=node, agent_boot_id="boot",
                          seq=seqs[node], sent_at=samples[-1].timestamp, gpus=infos,
                          samples=samples)  # fmt: skip
            body = msgspec.json.encode(batch)
            ack = core.service.submit(body, None, samples[-1].timestamp).result(10)
            assert ack.status == "accepted"
    core.applier.tick(flush=True)
    core.close()
    core.ledger.close()
    return path


def report(db: Path, *args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "gpufleet", "report", "--db", str(db), *args],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(out.stdout) if "json" in args else out.stdout


def whole_period(db: Path, by: str) -> Any:
    return report(db, "--by", by, "--period", "2h", "--end", "2026-01-01T00:00:00Z",
                  "--format", "json")  # fmt: skip


@pytest.mark.parametrize("by", ["namespace", "team", "owner", "queue", "model", "node"])
def test_every_grouping_adds_up_to_the_fleet_total(db: Path, by: str) -> None:
    answer = whole_period(db, by)
    for column, truth in TRUTH.items():
        assert answer["total"][column] == pytest.approx(truth, abs=0.002), column
        assert sum(r[column] for r in answer["rows"]) == pytest.approx(truth, abs=0.02), column


def test_namespaces_include_the_gpus_nobody_held_and_estimated_energy(db: Path) -> None:
    rows = {r["group"]: r for r in whole_period(db, "namespace")["rows"]}
    assert set(rows) == set(BY_NAMESPACE)
    for group, (idle_hours, waste, kwh, estimated_kwh) in BY_NAMESPACE.items():
        row = rows[group]
        assert row["idle_gpu_hours"] == pytest.approx(idle_hours, abs=0.001)
        assert row["waste"] == pytest.approx(waste, abs=0.01)
        assert row["energy_kwh"] == pytest.approx(kwh, abs=0.001)
        assert row["estimated_energy_kwh"] == pytest.approx(estimated_kwh, abs=0.001)


def test_the_table_prints_a_total_row_and_the_period(db: Path) -> None:
    text = report(db, "--by", "namespace", "--period", "2h", "--end", "2026-01-01T00:00:00Z")
    total = next(line for line in text.splitlines() if "total" in line)
    assert f"{TRUTH['waste']:.2f}" in total and f"{TRUTH['idle_gpu_hours']:.3f}" in total
    assert "(unallocated)" in text
    assert "2025-12-31 22:00" in text and "2026-01-01 00:00" in text


@pytest.mark.parametrize(
    ("period", "end", "covered", "idle_gpu_hours"),
    [  # idle GPU-hours: GPU-a and GPU-b are idle the whole time, 2 GPU-hours per hour
        ("1.75h", "2026-01-01T00:00:00Z", ("2025-12-31T22:00:00Z", "2026-01-01T00:00:00Z"), 4.0),
        ("0.5h", "2025-12-31T23:30:00Z", ("2025-12-31T23:00:00Z", "2026-01-01T00:00:00Z"), 2.0),
    ],
)
def test_a_period_covers_the_whole_hours_it_touches_and_says_which(
    db: Path, period: str, end: str, covered: tuple[str, str], idle_gpu_hours: float
) -> None:
    """A period from 22:15 used to leave out 22:00..23:00 (the ledger keeps whole hours);
    /v1/workloads counted it. Both cover the hours the period touches and state them."""
    answer = report(db, "--by", "node", "--period", period, "--end", end, "--format", "json")
    assert (answer["start"], answer["end"]) == covered
    assert answer["total"]["idle_gpu_hours"] == pytest.approx(idle_gpu_hours, abs=0.001)
    assert answer["asked_end"] == end


def test_report_and_workloads_api_count_the_same_hours(db: Path) -> None:
    answer = report(db, "--by", "namespace", "--period", "1.75h", "--end",
                    "2026-01-01T00:00:00Z", "--format", "json")  # fmt: skip
    rows = {r["group"]: r for r in answer["rows"]}
    rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
    core = CollectorCore.build(CollectorSettings(), Ledger.open(str(db)), rates, lambda: H24)
    try:
        reports = {r.namespace: r for r in core.service.workloads(H24 - 1.75 * 3600, H24)}
    finally:
        core.close()
        core.ledger.close()
    assert set(reports) == {"ml", "cv"}
    for namespace, workload in reports.items():
        idle_hours = workload.usage.idle_seconds / 3600
        assert rows[namespace]["idle_gpu_hours"] == pytest.approx(idle_hours, abs=0.001)
        assert rows[namespace]["energy_kwh"] == pytest.approx(
            workload.usage.energy_joules / KWH, abs=0.001
        )
    assert rows["ml"]["idle_gpu_hours"] == pytest.approx(2.0, abs=0.001)  # the truth
