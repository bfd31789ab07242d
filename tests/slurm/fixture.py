"""The ``slurm`` fixture: one real Slurm cluster per test session (tests/slurm/cluster.py).

A conftest or test module that needs it imports it:
``from tests.slurm.fixture import slurm  # noqa: F401``. Each test cancels its own jobs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm.cluster import SlurmCluster, available, start_cluster, stop_cluster


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    if not available():
        pytest.fail("Slurm is not installed: scripts/test installs slurm-wlm and munge")
    # short path: slurmd's spool holds a unix socket (108-byte limit)
    directory = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    cluster = start_cluster(directory)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture
def slurm_jobs(slurm: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster, with every job cancelled after the test."""
    try:
        yield slurm
    finally:
        slurm.cancel_all()
