"""A real Slurm 22.05 job's GPUs from its processes' environment, squeue absent: a job
given two fake GPUs (``--gres=gpu:2``) whose one process runs on the first is found on
both, through the SLURM_JOB_GPUS that slurmd put in the real /proc/PID/environ."""

from __future__ import annotations

from pathlib import Path

from agent.attribution.attributor import Attributor
from agent.config import AttributionSettings
from agent.model import GpuInfo, GpuSample, ProcessSample
from tests.slurm.cluster import SlurmCluster

UUIDS = [f"GPU-5e1f0a2b-000{i}-4000-8000-00000000000{i}" for i in range(4)]


def test_a_real_jobs_gpu_without_its_process_is_the_jobs(
    slurm_jobs: SlurmCluster, tmp_path: Path
) -> None:
    job = slurm_jobs.sbatch("--gres=gpu:2", "-A", "team-a", "-p", "gpu", "-J", "two-gpus")
    (detail,) = slurm_jobs.wait_running(job)["gres_detail"]  # Slurm's word: "gpu:2(IDX:0-1)"
    low, _, high = detail.split("IDX:")[1].rstrip(")").partition("-")
    held = list(range(int(low), int(high or low) + 1))
    assert len(held) == 2
    pid = max(slurm_jobs.job_pids(job))  # the job's sleep
    gpus = [GpuInfo(uuid=u, index=i, name="NVIDIA A100-SXM4-80GB") for i, u in enumerate(UUIDS)]
    samples = [
        GpuSample(timestamp=1.7e9, gpu_uuid=u,
                  processes=(ProcessSample(pid=pid),) if i == held[0] else ())
        for i, u in enumerate(UUIDS)
    ]  # fmt: skip
    settings = AttributionSettings(
        kubelet_socket=tmp_path / "no-kubelet.sock",
        proc_root=Path("/proc"),
        gpustat_dir=tmp_path / "no-gpustat",
        squeue_path="",  # Slurm is not asked: the environment alone says it
    )
    attributor = Attributor(settings)
    try:
        result = {s.gpu_uuid: s.workloads for s in attributor.annotate(gpus, samples)}
    finally:
        attributor.close()
    for index, uuid in enumerate(UUIDS):
        if index in held:
            (workload,) = result[uuid]
            assert workload.key == f"slurm:{job}" and workload.name == "two-gpus"
            assert workload.labels["slurm_account"] == "team-a"
            assert workload.labels["slurm_partition"] == "gpu"
        else:
            assert result[uuid] == ()
