"""Slurm prolog mapping files: jobstats /run/gpustat and dcgm-exporter's hpc-job-mapping."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.attribution.attributor import Attributor
from agent.attribution.hpc import JobAllocation, MappingFiles, parse_gpustat, parse_hpc_job_mapping
from agent.model import Workload, WorkloadKind
from tests.agent.attribution.test_attributor import (
    FIXTURES,
    G0,
    G1,
    G2,
    G3,
    M21,
    M22,
    FakeClock,
    by_gpu,
    keys,
    node_gpus,
    sample,
    settings,
)

GPUSTAT = FIXTURES / "gpustat" / "run-gpustat"
HPC = FIXTURES / "gpustat" / "hpc-job-mapping"


def test_parse_gpustat() -> None:
    assert parse_gpustat("0", "4242 1000\n") == JobAllocation("0", "4242", 1000)
    assert parse_gpustat("0", "4242\n") == JobAllocation("0", "4242", None)
    assert parse_gpustat("0", "") is None
    assert parse_gpustat("0", "not-a-job 1\n") is None


def test_parse_hpc_job_mapping() -> None:
    assert parse_hpc_job_mapping("2.1", "11\n\n12\n") == [
        JobAllocation("2.1", "11"),
        JobAllocation("2.1", "12"),
    ]


def test_both_conventions_resolved_to_gpus_and_mig_slices(tmp_path: Path) -> None:
    attributor = Attributor(
        settings(tmp_path, gpustat_dir=GPUSTAT, hpc_job_mapping_dir=HPC), monotonic=FakeClock()
    )
    result = by_gpu(
        attributor.annotate(node_gpus(), [sample(u) for u in (G0, G1, G2, M21, M22, G3)])
    )
    attributor.close()
    # the prolog wrote job 4242 under both the index and the UUID: listed once
    assert result[G0] == (
        Workload(kind=WorkloadKind.SLURM_JOB, id="4242", slurm_job_id="4242", user="4001000"),
    )
    assert keys(result[G1]) == ["slurm:5151"]
    assert keys(result[M21]) == ["slurm:6161"]
    assert keys(result[M22]) == ["slurm:8001"]
    assert keys(result[G3]) == ["slurm:7001", "slurm:7002"]  # two jobs share GPU 3
    assert result[G2] == ()


def test_files_are_reread_after_the_refresh_period(tmp_path: Path) -> None:
    gpustat = tmp_path / "gpustat"
    gpustat.mkdir()
    clock = FakeClock()
    attributor = Attributor(settings(tmp_path, gpustat_dir=gpustat), monotonic=clock)
    assert attributor.annotate(node_gpus(), [sample(G3)])[0].workloads == ()
    (gpustat / G3).write_text("31337 0\n")  # a prolog runs
    clock.now += 1.0
    assert attributor.annotate(node_gpus(), [sample(G3)])[0].workloads == ()
    clock.now += 4.0
    [result] = attributor.annotate(node_gpus(), [sample(G3)])
    assert result.workloads == (
        Workload(kind=WorkloadKind.SLURM_JOB, id="31337", slurm_job_id="31337", user="root"),
    )
    (gpustat / G3).unlink()  # the epilog runs
    clock.now += 5.0
    assert attributor.annotate(node_gpus(), [sample(G3)])[0].workloads == ()
    attributor.close()


def test_missing_directories_are_quiet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="agent.attribution.hpc"):
        assert MappingFiles(tmp_path / "absent", tmp_path / "also-absent").read() == []
        assert MappingFiles(None, None).read() == []
    assert caplog.records == []


def test_entries_that_name_no_job_are_skipped_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "0").write_text("1 0\n")
    (tmp_path / "1").mkdir()  # not a file
    (tmp_path / "2").write_bytes(b"\xff\xfe 7\n")  # garbage
    with caplog.at_level(logging.WARNING):
        assert MappingFiles(tmp_path, None).read() == [JobAllocation("0", "1", 0)]
    assert caplog.records == []


def test_an_unlistable_directory_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_directory = tmp_path / "gpustat"
    not_a_directory.write_text("4242 0\n")
    files = MappingFiles(not_a_directory, None)
    with caplog.at_level(logging.WARNING):
        assert files.read() == files.read() == []
    assert len(caplog.records) == 1
