"""A real single-node Slurm 22.05 cluster for tests: munged, slurmctld and slurmd as plain
processes in a temporary directory, on loopback ports, with 4 fake GPUs through gres.

The recipe is tests/slurm/slurm_local.sh (from ../shared/research/slurm-local.md): the
GPUs are character devices ``DIR/dev/nvidia[0-3]`` (``mknod c 195 N``), so jobs get
``CUDA_VISIBLE_DEVICES`` and ``SLURM_JOB_GPUS``; no cgroups (proctrack/linuxproc), no
slurmdbd (``-A`` takes any account string). Every Slurm command needs ``SLURM_CONF``:
``cluster.env`` is the environment to run them with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("slurm_local.sh")
GPUS = 4
#: job ids from here on, so a test's ids never look like a stand-in's small numbers
FIRST_JOB_ID = 1000


class SlurmClusterError(Exception):
    """The cluster did not start, or a job did not reach the state a test waits for."""


def available() -> bool:
    return all(shutil.which(p) for p in ("slurmctld", "slurmd", "munged", "sbatch", "mknod"))


@dataclass(frozen=True)
class SlurmCluster:
    directory: Path
    node: str

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.directory / "slurm.conf")}

    def run(self, *argv: str, timeout_seconds: float = 20) -> str:
        done = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=timeout_seconds
        )
        if done.returncode != 0:
            raise SlurmClusterError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def sbatch(self, *options: str, command: str = "sleep 600") -> str:
        """Submits a batch job running ``command``; returns its id."""
        out = self.run(
            "sbatch", "--parsable", "-o", str(self.directory / "jobs" / "%j.out"),
            *options, "--wrap", command,
        )  # fmt: skip
        return out.strip().split(";")[0]

    def squeue_json(self) -> str:
        return self.run("squeue", "--json")

    def job(self, job_id: str) -> dict[str, Any] | None:
        jobs = json.loads(self.squeue_json())["jobs"]
        return next((j for j in jobs if str(j["job_id"]) == job_id), None)

    def wait_running(self, job_id: str, timeout_seconds: float = 20) -> dict[str, Any]:
        """The job's squeue record once RUNNING and its batch process started."""
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job is not None and job["job_state"] == "RUNNING" and self.job_pids(job_id):
                return job
            time.sleep(0.1)
        raise SlurmClusterError(
            f"job {job_id} not running after {timeout_seconds}s:\n{self.logs()}"
        )

    def job_pids(self, job_id: str) -> list[int]:
        """PIDs on this machine whose environment says SLURM_JOB_ID=job_id (the job's
        batch shell and what it runs; slurmstepd wipes its own)."""
        marker = f"SLURM_JOB_ID={job_id}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                pids.append(int(entry.name))
        return sorted(pids)

    def cancel_all(self) -> None:
        ids = self.run("squeue", "-h", "-o", "%i").split()
        if ids:
            self.run("scancel", *ids)

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munged.out"):
            path = self.directory / "log" / name
            if path.exists():
                parts.append(f"--- {path} (last 30 lines)\n" + "\n".join(
                    path.read_text(errors="replace").splitlines()[-30:]))  # fmt: skip
        return "\n".join(parts)


def start_cluster(directory: Path) -> SlurmCluster:
    """Starts the cluster in ``directory`` and waits until its node is idle."""
    # munged refuses a socket below a directory others cannot search (mkdtemp makes 0700)
    directory.chmod(0o755)
    env = {
        **os.environ,
        "SLURM_LOCAL_GPUS": str(GPUS),
        "SLURM_LOCAL_EXTRA": f"FirstJobId={FIRST_JOB_ID}",
        "SLURM_LOCAL_TIMEOUT": "20",
    }
    done = subprocess.run(
        [str(SCRIPT), "start", str(directory)], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    cluster = SlurmCluster(directory, node)
    if done.returncode != 0:
        raise SlurmClusterError(
            f"slurm_local.sh start exited {done.returncode}:\n{done.stderr}\n{cluster.logs()}"
        )
    return cluster


def stop_cluster(cluster: SlurmCluster) -> None:
    subprocess.run(
        [str(SCRIPT), "stop", str(cluster.directory)], capture_output=True, timeout=60, check=False
    )
