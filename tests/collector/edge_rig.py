"""The real collector core over a SQLite file behind the real HTTP app on loopback, on a
clock the test moves: the rig of the edge-bound tests (values the ledger cannot hold,
physical bounds, late samples)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from collector.config import CollectorSettings
from collector.http.app import create_app
from collector.ledger.store import Ledger
from collector.service import CollectorCore
from tests.collector.http.test_app import served
from tests.collector.test_core import T0, example_rates

TOKEN = "edge-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
H100 = GpuInfo(uuid="GPU-edge-0", index=0, name="NVIDIA H100 80GB HBM3")
WATTS = 300.0


class Clock:
    """The collector's clock: the core's and the HTTP edge's, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextmanager
def edge_rig(db: Path, clock: Clock) -> Iterator[tuple[CollectorCore, httpx.Client]]:
    settings = CollectorSettings()
    core = CollectorCore.build(settings, Ledger.open(str(db)), example_rates(), clock)
    try:
        with served(create_app(core.service, settings, [TOKEN], clock=clock)) as http:
            yield core, http
    finally:
        core.close()
        core.ledger.close()


def batch(
    seq: int, times: range, node: str = "node-a", gpu: GpuInfo = H100, **sample: Any
) -> Batch:
    """``gpu`` drawing WATTS since T0, read at T0 + each of ``times``; ``sample``'s fields
    set on every sample."""
    samples = tuple(
        GpuSample(
            **{
                "timestamp": T0 + t,
                "gpu_uuid": gpu.uuid,
                "sm_activity": 0.5,
                "dram_activity": 0.5,
                "power_watts": WATTS,
                "energy_joules": WATTS * t,
                **sample,
            }
        )
        for t in times
    )
    return Batch(schema_version=SCHEMA_VERSION, node=node, agent_boot_id=f"boot-{node}",
                 seq=seq, sent_at=T0 + times[-1], gpus=(gpu,), samples=samples)  # fmt: skip


def raw(b: Batch) -> dict[str, Any]:
    """``b`` as JSON values, to set what no Batch can be built with."""
    value: dict[str, Any] = msgspec.to_builtins(b)
    return value


def post(http: httpx.Client, body: bytes | dict[str, Any] | Batch) -> httpx.Response:
    if isinstance(body, Batch | dict):
        body = msgspec.json.encode(body)
    return http.post("/v1/batches", content=body, headers=AUTH)


def ledger_energy(core: CollectorCore) -> float:
    return sum(u.energy_joules for _, u in core.ledger.usage_totals_by_gpu())
