"""The real Slurm cluster (tests/slurm) for the executor's tests."""

from tests.slurm.fixture import slurm, slurm_jobs  # noqa: F401
