"""The Slurm executor against a real Slurm 22.05 cluster (tests/slurm): real sbatch, scancel
and scontrol. scancel exits 0 for any job id, so only the job's state tells a release."""

from __future__ import annotations

import pytest

from collector.actions.executors import ExecutorError, SlurmExecutor, Target
from collector.actions.settings import SlurmSettings
from tests.slurm.cluster import SlurmCluster

pytestmark = pytest.mark.slow


@pytest.fixture
def executor(slurm_jobs: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmExecutor:
    monkeypatch.setenv("SLURM_CONF", slurm_jobs.env["SLURM_CONF"])
    return SlurmExecutor(SlurmSettings(enabled=True))


def target(job_id: str) -> Target:
    return Target(f"slurm:{job_id}", "slurm", "team-a", job_id)


def test_a_running_job_is_cancelled_and_its_processes_are_gone(
    slurm_jobs: SlurmCluster, executor: SlurmExecutor
) -> None:
    job = slurm_jobs.sbatch("--gres=gpu:1", "-A", "team-a", "-J", "idle")
    other = slurm_jobs.sbatch("--gres=gpu:1", "-A", "team-a", "-J", "busy")
    slurm_jobs.wait_running(job)
    slurm_jobs.wait_running(other)
    assert executor.inspect(target(job)).exists
    assert executor.release(target(job), "gpufleet: idle") == f"scancel {job}"
    assert slurm_jobs.job(job)["job_state"] == "CANCELLED"  # type: ignore[index]
    assert slurm_jobs.job_pids(job) == []
    assert slurm_jobs.job(other)["job_state"] == "RUNNING"  # type: ignore[index]
    # a second release finds the job finished: nothing cancelled, and it says so
    seen = executor.inspect(target(job))
    assert not seen.exists and seen.action == f"Slurm job {job} already CANCELLED"
    with pytest.raises(ExecutorError, match="already CANCELLED; nothing cancelled"):
        executor.release(target(job), "gpufleet: idle")


def test_an_id_slurm_never_had_is_not_found_not_released(executor: SlurmExecutor) -> None:
    seen = executor.inspect(target("424242"))
    assert not seen.exists and seen.action == "Slurm job 424242 not found"
    with pytest.raises(ExecutorError, match="424242 not found; nothing cancelled"):
        executor.release(target("424242"), "gpufleet: idle")


def test_a_job_that_ignores_the_signal_is_a_failed_release(
    slurm_jobs: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", slurm_jobs.env["SLURM_CONF"])
    job = slurm_jobs.sbatch("--gres=gpu:1", command="trap '' USR1; sleep 600")
    slurm_jobs.wait_running(job)
    # --signal=USR1 signals the job and leaves it running: scancel still exits 0
    ex = SlurmExecutor(SlurmSettings(enabled=True, signal="USR1", verify_seconds=1.0))
    with pytest.raises(ExecutorError, match=f"exited 0 but Slurm job {job} is still RUNNING"):
        ex.release(target(job), "gpufleet: idle")
