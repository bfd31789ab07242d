"""Fixtures the end-to-end modules share."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.fleet_rig import FleetRig
from tests.postgres_fixture import postgres  # noqa: F401
from tests.slurm.fixture import slurm, slurm_jobs  # noqa: F401


@pytest.fixture(scope="module")
def http(rig: FleetRig) -> Iterator[httpx.Client]:
    """A client of the module's ``rig`` (each module runs its own fleet) collector."""
    with httpx.Client(base_url=rig.url, timeout=10) as client:
        yield client
