"""The real HTTP app over a real core on loopback, with a clock the test moves: for the
memory bounds (tests/collector/test_bounds.py) and admission control
(tests/collector/http/test_admission.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec
from starlette.routing import BaseRoute

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from collector.config import CollectorSettings
from collector.http.app import create_app
from collector.ledger.store import Ledger
from collector.service import CollectorCore
from tests.collector.http.test_app import served
from tests.collector.test_core import T0, example_rates

TOKEN = "t0ken-bounds"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


class Clock:
    """Unix seconds that move only when the test says (the app's and the core's)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Rig:
    core: CollectorCore
    http: httpx.Client
    clock: Clock

    def post(self, body: bytes) -> httpx.Response:
        return self.http.post("/v1/batches", content=body, headers=HEADERS)

    def fleet_nodes(self) -> dict[str, int]:
        """GPUs per node, as GET /v1/fleet lists them."""
        gpus = self.http.get("/v1/fleet", headers=HEADERS).raise_for_status().json()["gpus"]
        nodes: dict[str, int] = {}
        for gpu in gpus:
            nodes[gpu["node"]] = nodes.get(gpu["node"], 0) + 1
        return nodes


@contextmanager
def rig(
    db: Path, settings: CollectorSettings, now: float = T0, routes: Sequence[BaseRoute] = ()
) -> Iterator[Rig]:
    """The app over the core; ``routes`` are the test's own, added to the app's."""
    clock = Clock(now)
    core = CollectorCore.build(settings, Ledger.open(str(db)), example_rates(), clock)
    app = create_app(core.service, settings, [TOKEN], clock=clock, extra_routes=routes)
    try:
        with served(app) as http:
            yield Rig(core, http, clock)
    finally:
        core.close()
        core.ledger.close()


def node_body(
    node: str,
    gpus: int,
    seq: int,
    at: float,
    region: str = "DEU",
    first: int = 0,
    pod: str | None = None,
) -> bytes:
    """One batch of ``node``: GPUs ``GPU-<node>-<first>``..., a sample each at ``at - 1``
    and at ``at`` (held by ``pod`` in namespace ``ml``, when given)."""
    holders = (Workload(kind=WorkloadKind.KUBERNETES_POD, id=pod, name=pod, namespace="ml"),)
    infos = tuple(
        GpuInfo(uuid=f"GPU-{node}-{i}", index=i, name="NVIDIA H100 80GB HBM3")
        for i in range(first, first + gpus)
    )
    samples = tuple(
        GpuSample(
            timestamp=t,
            gpu_uuid=info.uuid,
            sm_activity=0.5,
            dram_activity=0.5,
            power_watts=300.0,
            energy_joules=1.0e6 + 300.0 * (t - T0),
            workloads=holders if pod else (),
        )
        for t in (at - 1, at)
        for info in infos
    )
    batch = Batch(schema_version=SCHEMA_VERSION, node=node, agent_boot_id=f"boot-{node}",
                  seq=seq, sent_at=at, gpus=infos, samples=samples,
                  node_labels={"region": region})  # fmt: skip
    return msgspec.json.encode(batch)
