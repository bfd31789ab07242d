"""cgroup, environ and status parsing, and the /proc reader over fixture trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.attribution.cgroups import (
    ENVIRON_KEYS,
    CgroupIdentity,
    cgroup_paths,
    parse_cgroup_file,
    parse_environ,
    parse_status_uid,
)
from agent.attribution.proc import ProcReader
from tests.agent.attribution.test_attributor import PROC, FakeClock

UID = "2c9f8a79-5391-454b-88cb-86190881cb96"
UID_ = UID.replace("-", "_")
ID = "9f" * 32


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (  # cgroup v2, systemd driver, containerd
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
            f"cri-containerd-{ID}.scope",
            CgroupIdentity(pod_uid=UID, container_id=f"containerd://{ID}"),
        ),
        (  # cgroup v2, systemd driver, CRI-O, guaranteed QoS (no QoS slice)
            f"0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope",
            CgroupIdentity(pod_uid=UID, container_id=f"cri-o://{ID}"),
        ),
        (  # cgroupfs driver
            f"4:memory:/kubepods/besteffort/pod{UID}/{ID}",
            CgroupIdentity(pod_uid=UID, container_id=ID),
        ),
        (  # old containerd layout under systemd
            f"1:name=systemd:/system.slice/containerd.service/kubepods-burstable-pod{UID_}.slice"
            f":cri-containerd:{ID}",
            CgroupIdentity(pod_uid=UID, container_id=f"containerd://{ID}"),
        ),
        (  # a docker container outside Kubernetes
            f"0::/system.slice/docker-{ID}.scope",
            CgroupIdentity(container_id=f"docker://{ID}"),
        ),
        (  # inside another cgroup namespace: a relative path
            f"0::/../../kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope",
            CgroupIdentity(pod_uid=UID, container_id=f"containerd://{ID}"),
        ),
        (  # Slurm, cgroup v1
            "7:devices:/slurm/uid_1000/job_4242/step_extern/task_special",
            CgroupIdentity(slurm_job_id="4242", slurm_step="extern", slurm_uid=1000),
        ),
        (  # Slurm, cgroup v2
            "0::/system.slice/slurmstepd.scope/job_77/step_3/user/task_0",
            CgroupIdentity(slurm_job_id="77", slurm_step="3"),
        ),
        (  # Slurm job directory seen from a cgroup namespace: the step marks it as Slurm's
            "0::/../job_77/step_batch",
            CgroupIdentity(slurm_job_id="77", slurm_step="batch"),
        ),
        (  # somebody else's "job_5" directory is not a Slurm job
            "0::/user.slice/user-1000.slice/job_5",
            CgroupIdentity(),
        ),
        ("0::/init.scope", CgroupIdentity()),
    ],
)
def test_parse_cgroup_lines(line: str, expected: CgroupIdentity) -> None:
    assert parse_cgroup_file(line + "\n") == expected


def test_hybrid_hierarchy_skips_the_empty_unified_line() -> None:
    text = f"0::/\n4:memory:/kubepods/pod{UID}/{ID}\n1:name=systemd:/kubepods/pod{UID}/{ID}\n"
    assert cgroup_paths(text)[0] == "/"
    assert parse_cgroup_file(text).pod_uid == UID


def test_environ_keeps_only_the_allow_list() -> None:
    data = b"HOME=/root\0SLURM_JOB_ID=12\0API_TOKEN=s3cret\0SLURM_JOB_USER=al=ice\0BROKEN\0\0"
    assert parse_environ(data) == {"SLURM_JOB_ID": "12", "SLURM_JOB_USER": "al=ice"}
    assert "API_TOKEN" not in ENVIRON_KEYS


def test_status_uid_is_the_real_uid() -> None:
    assert parse_status_uid("Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n") == 1000
    assert parse_status_uid("Name:\tx\n") is None


@pytest.mark.parametrize(
    ("pid", "pod_uid", "container_id"),
    [
        (
            1001,
            UID,
            "containerd://3f2a9d7c1b5e8a4f6d0c2b1a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d",
        ),
        (
            1002,
            "5a89bcaa-3509-4375-83e1-b9e7a5712123",
            "8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d",
        ),
        (
            1003,
            "7d3e1c2a-0b4f-4e8a-9c6d-5f1e2d3c4b5a",
            "cri-o://a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
        ),
        (
            1004,
            "9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
            "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        (
            1005,
            "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
            "docker://fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
        ),
        (
            1006,
            "4c3b2a1d-0e9f-4a8b-9c7d-6e5f4a3b2c1d",
            "containerd://5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e",
        ),
    ],
)
def test_fixture_pods(pid: int, pod_uid: str, container_id: str) -> None:
    identity = ProcReader(PROC, 5.0).identity(pid)
    assert identity is not None
    assert (identity.cgroup.pod_uid, identity.cgroup.container_id) == (pod_uid, container_id)
    assert "API_TOKEN" not in identity.environ


def test_fixture_slurm_and_bare_processes() -> None:
    reader = ProcReader(PROC, 5.0)
    job = reader.identity(2001)
    assert job is not None
    assert job.cgroup == CgroupIdentity(slurm_job_id="4242", slurm_step="0", slurm_uid=4001000)
    assert job.environ["SLURM_JOB_USER"] == "alice"
    assert job.uid == 4001000
    bare = reader.identity(3001)
    assert bare is not None
    assert (bare.cgroup, bare.uid, bare.comm, bare.environ) == (CgroupIdentity(), 0, "Xorg", {})


def test_vanished_processes_are_none_without_counting_errors() -> None:
    reader = ProcReader(PROC, 5.0)
    assert reader.identity(3002) is None  # half-gone directory
    assert reader.identity(987654) is None  # no directory at all
    assert reader.errors_total == 0


def test_unreadable_entries_are_skipped_and_counted(tmp_path: Path) -> None:
    shutil.copytree(PROC / "2001", tmp_path / "2001")
    (tmp_path / "2001" / "environ").unlink()
    (tmp_path / "2001" / "environ").mkdir()  # reading it fails with IsADirectoryError
    (tmp_path / "5").mkdir()
    (tmp_path / "5" / "cgroup").mkdir()
    reader = ProcReader(tmp_path, 5.0)
    identity = reader.identity(2001)
    assert identity is not None
    assert (identity.cgroup.slurm_job_id, identity.environ) == ("4242", {})
    assert reader.identity(5) is None
    assert reader.errors_total == 2


def test_answers_are_cached_for_the_refresh_period(tmp_path: Path) -> None:
    shutil.copytree(PROC / "3001", tmp_path / "3001")
    clock = FakeClock()
    reader = ProcReader(tmp_path, 5.0, clock)
    assert reader.identity(3001).cgroup == CgroupIdentity()  # type: ignore[union-attr]
    (tmp_path / "3001" / "cgroup").write_text("0::/slurm/uid_0/job_1/step_0\n")
    clock.now += 4.9
    assert reader.identity(3001).cgroup == CgroupIdentity()  # type: ignore[union-attr]
    clock.now += 0.1
    assert reader.identity(3001).cgroup.slurm_job_id == "1"  # type: ignore[union-attr]
    reader.forget_except([])
    (tmp_path / "3001" / "cgroup").write_text("0::/init.scope\n")
    assert reader.identity(3001).cgroup == CgroupIdentity()  # type: ignore[union-attr]
