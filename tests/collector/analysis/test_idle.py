"""Activity classification, idle episodes, and the Alibaba replay figures."""

from __future__ import annotations

import csv
import io
import tarfile
from collections import defaultdict

import pytest

from agent.model import GpuSample
from collector.analysis.idle import (
    classify_activity,
    longest_zero_run,
    zero_fraction,
)
from collector.records import Activity
from tests.paths import FIXTURES

ACT, IDL, UNK = Activity.ACTIVE, Activity.IDLE, Activity.UNKNOWN


def sample(sm: float | None, dram: float | None, healthy: bool = True) -> GpuSample:
    return GpuSample(timestamp=0.0, gpu_uuid="GPU-1", sm_activity=sm, dram_activity=dram,
                     healthy=healthy)  # fmt: skip


@pytest.mark.parametrize(
    ("sm", "dram", "expected"),
    [
        (0.0, 0.0, IDL),
        (0.009, 0.009, IDL),
        (0.01, 0.0, ACT),  # at the threshold is active
        (0.0, 0.5, ACT),  # DRAM alone makes it active
        (0.5, None, ACT),  # one reading above is enough
        (None, 0.5, ACT),
        (0.0, None, UNK),  # one below, the other unknown: cannot say
        (None, 0.0, UNK),
        (None, None, UNK),
        (float("nan"), 0.0, UNK),
    ],
)
def test_classify_activity(sm: float | None, dram: float | None, expected: Activity) -> None:
    assert classify_activity(sample(sm, dram), 0.01) is expected


def test_dram_unsupported_decides_on_sm_alone() -> None:
    assert classify_activity(sample(0.0, None), 0.01, dram_unsupported=True) is IDL
    assert classify_activity(sample(None, None), 0.01, dram_unsupported=True) is UNK


def test_unhealthy_is_unknown_even_with_readings() -> None:
    assert classify_activity(sample(0.0, 0.0, healthy=False), 0.01) is UNK


def test_zero_fraction_and_longest_zero_run() -> None:
    assert zero_fraction([0.0, 1.0, 0.0, 0.0]) == 0.75
    assert zero_fraction([]) == 0.0
    run = longest_zero_run([(0, 0.0), (57, 0.0), (114, 3.0), (171, 0.0), (400, 0.0), (457, 0.0)])
    assert (run.samples, run.start, run.end, run.span_seconds) == (3, 171, 457, 286)


# The 7-pod Alibaba GenTD26 sample and its expected table (SOURCE.md in the reference).
# the two sample CSVs, unmodified, packed in the replay fixture (see its SOURCE.md)
ALIBABA = FIXTURES / "replay" / "alibaba-genai-2026-7pods.tar.gz"
EXPECTED = {  # pod: (samples, zero fraction, longest zero run, its span in minutes)
    "87b9247b": (1222, 0.998, 1162, 1311.0),
    "673d3687": (1440, 0.997, 1385, 1315.8),
    "9f86ada5": (73, 0.973, 70, 65.5),
    "e776c139": (1441, 0.656, 246, 232.8),
    "ae3389e2": (1441, 0.667, 69, 64.6),
    "3ed83727": (992, 0.559, 40, 93.1),
    "2e6ae913": (832, 0.474, 30, 85.5),
}


def load_alibaba() -> dict[str, list[tuple[float, float]]]:
    pods: dict[str, list[tuple[float, float]]] = defaultdict(list)
    with tarfile.open(ALIBABA) as archive:
        member = archive.extractfile("pod_gpu_duty_cycle_sample.csv")
        assert member is not None
        for row in csv.DictReader(io.TextIOWrapper(member, encoding="utf-8")):
            pods[row["container_ip"][:8]].append(
                (float(row["timestamp_anon"]), float(row["value"]))
            )
    return pods


def test_alibaba_sample_matches_source_table() -> None:
    """Gaps are ignored here, as in the table: a run counts consecutive zero samples."""
    pods = load_alibaba()
    assert set(pods) == set(EXPECTED)
    for pod, (count, zeros, run_samples, span_minutes) in EXPECTED.items():
        points = pods[pod]
        run = longest_zero_run(points)
        assert len(points) == count, pod
        assert zero_fraction([v for _, v in points]) == pytest.approx(zeros, abs=5e-4), pod
        assert run.samples == run_samples, pod
        assert run.span_seconds / 60 == pytest.approx(span_minutes, abs=0.051), pod
