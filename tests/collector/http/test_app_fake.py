"""An in-memory CollectorBackend (a fake of the interface, holding plain data) and batch
builders, shared by the app and exporter tests; plus checks that the fake keeps the
contract the tests rely on."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import httpx
from starlette.types import ASGIApp

from agent.model import SCHEMA_VERSION, Batch, BatchAck, GpuInfo, GpuSample, Workload, WorkloadKind
from collector.backend import (
    CollectorBackend,
    FleetTotals,
    HealthReport,
    IngestCounters,
    IngestReport,
    ReadVersion,
    RejectReason,
    WorkloadReport,
)
from collector.config import CollectorSettings
from collector.ingest.decode import accept_body
from collector.records import (
    DuplicateGpu,
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
)

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class AsgiClient:
    """Calls an ASGI app in-process through httpx's ASGITransport, synchronously: the fast
    path for checks that need no socket (Starlette's TestClient wants another package)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.request(method, url, **kwargs)

        return anyio.run(call)

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)


def make_batch(
    node: str = "node-a", seq: int = 1, gpus: int = 2, at: float = NOW, **sample_fields: object
) -> Batch:
    """A valid batch: ``gpus`` GPUs on ``node``, one sample each at ``at``; sample fields
    in ``sample_fields`` are set on every sample."""
    infos = tuple(
        GpuInfo(uuid=f"GPU-{node}-{i}", index=i, name="NVIDIA H100 80GB HBM3") for i in range(gpus)
    )
    pod = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid-1", name="train-1", namespace="ml")
    base = {"sm_activity": 0.5, "power_watts": 300.0, "energy_joules": 1.0e6}
    values = {**base, **sample_fields}
    samples = tuple(
        GpuSample(timestamp=at, gpu_uuid=info.uuid, workloads=(pod,), **values)  # type: ignore[arg-type]
        for info in infos
    )
    return Batch(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_boot_id="boot-1",
        seq=seq,
        sent_at=at,
        gpus=infos,
        samples=samples,
    )


def make_recommendation(rec_id: str, kind: RecommendationKind, money: float) -> Recommendation:
    return Recommendation(
        id=rec_id,
        kind=kind,
        subject="pod:ml/notebook-7",
        title=f"{kind.value} {rec_id}",
        evidence={"idle_seconds": 3600.0},
        # seen for an hour: the low end is one hour's saving, confidence 1 h of a week
        savings=Savings(money, 10.0, 4.0, "CNY", money / 730.0, 3600.0, money / 730.0, 1 / 168),
        status=RecommendationStatus.OPEN,
        opened_at=NOW - 3600,
        updated_at=NOW - 60,
    )


@dataclass
class FakeBackend:
    """Holds what it is given and records every call; thread-safe like the real one."""

    views: list[GpuView] = field(default_factory=list)
    reports: list[WorkloadReport] = field(default_factory=list)
    recs: dict[str, Recommendation] = field(default_factory=dict)
    totals: FleetTotals = field(default_factory=lambda: FleetTotals("CNY"))
    healthy: bool = True
    #: node -> clock offset (seconds, node ahead positive), as the live fleet measures it
    clock_offsets: dict[str, float] = field(default_factory=dict)
    fail_ingest: bool = False
    #: what ``submit`` checks bodies against (the real collector's are its settings)
    settings: CollectorSettings = field(default_factory=CollectorSettings)
    ingested: list[tuple[Batch, bytes, float]] = field(default_factory=list)
    rejections: Counter[tuple[str, int]] = field(default_factory=Counter)
    workload_calls: list[tuple[float, float]] = field(default_factory=list)
    status_calls: list[tuple[RecommendationStatus, ...]] = field(default_factory=list)
    #: how often ``fleet`` was read
    fleet_calls: int = 0
    #: bumped by ingest and dismiss, as the real one's counters move (read views' cache)
    version: ReadVersion = field(default_factory=lambda: ReadVersion(0, 0))
    _acked: set[tuple[str, str, int]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ingest(self, batch: Batch, body: bytes, received_at: float) -> BatchAck:
        if self.fail_ingest:
            raise OSError("disk full")
        key = (batch.node, batch.agent_boot_id, batch.seq)
        with self._lock:
            duplicate = key in self._acked
            if not duplicate:
                self._acked.add(key)
                self.ingested.append((batch, body, received_at))
                self.version = self.version._replace(fleet=self.version.fleet + 1)
        ack = {"node": batch.node, "agent_boot_id": batch.agent_boot_id, "seq": batch.seq}
        if duplicate:
            return BatchAck(status="duplicate", **ack)  # type: ignore[arg-type]
        return BatchAck(status="accepted", samples_accepted=len(batch.samples), **ack)  # type: ignore[arg-type]

    def submit(
        self,
        body: bytes,
        content_encoding: str | None,
        received_at: float,
        nodes: object = None,
    ) -> Future[BatchAck]:
        """As the pipeline's: the body checked by the real ``accept_body`` (with
        ``settings``), then ``ingest``; done at once, on the caller's thread. ``nodes``
        (the token's binding) is the real queue's to check: tests/collector/http/
        test_node_binding.py runs it."""
        future: Future[BatchAck] = Future()
        try:
            batch = accept_body(body, content_encoding, received_at, self.settings)
            future.set_result(self.ingest(batch, body, received_at))
        except Exception as err:  # as the real one: the future fails, the edge answers
            future.set_exception(err)
        return future

    def record_rejection(self, reason: RejectReason, samples: int) -> None:
        with self._lock:
            self.rejections[(reason.value, samples)] += 1

    def fleet(self, now: float) -> list[GpuView]:
        with self._lock:
            self.fleet_calls += 1
            nodes = {batch.node for batch, _, _ in self.ingested}
        ingested = [view_of(uuid, node) for node in sorted(nodes) for uuid in self._uuids(node)]
        return [*self.views, *ingested]

    def _uuids(self, node: str) -> list[str]:
        batches = [b for b, _, _ in self.ingested if b.node == node]
        return sorted({info.uuid for batch in batches for info in batch.gpus})

    def workloads(self, start: float, end: float) -> list[WorkloadReport]:
        self.workload_calls.append((start, end))
        return list(self.reports)

    def recommendations(self, statuses: Collection[RecommendationStatus]) -> list[Recommendation]:
        self.status_calls.append(tuple(statuses))
        return [rec for rec in self.recs.values() if rec.status in statuses]

    def dismiss(self, rec_id: str, now: float) -> Recommendation | None:
        if rec_id not in self.recs:
            return None
        rec = replace(self.recs[rec_id], status=RecommendationStatus.DISMISSED, updated_at=now)
        self.recs[rec_id] = rec
        self.version = self.version._replace(ledger=self.version.ledger + 1)
        return rec

    def restore(self, rec_id: str, now: float) -> Recommendation | None:
        if rec_id not in self.recs:
            return None
        rec = replace(self.recs[rec_id], status=RecommendationStatus.OPEN, updated_at=now)
        self.recs[rec_id] = rec
        self.version = self.version._replace(ledger=self.version.ledger + 1)
        return rec

    def health(self) -> HealthReport:
        last = self.ingested[-1][2] if self.ingested else None
        detail = "" if self.healthy else "database is locked"
        return HealthReport(self.healthy, last, 2.5, 7, detail, dict(self.clock_offsets))

    def fleet_totals(self) -> FleetTotals:
        return self.totals

    def ingest_report(self) -> IngestReport:
        last = self.ingested[-1][2] if self.ingested else None
        return IngestReport(self.totals.ingest, self.totals.intake_corrupt_records, last)

    def duplicate_gpus(self) -> list[DuplicateGpu]:
        return []

    def read_version(self) -> ReadVersion:
        return self.version


def view_of(uuid: str, node: str, state: GpuState = GpuState.ACTIVE) -> GpuView:
    return GpuView(uuid=uuid, node=node, index=0, model="H100", name="H100", state=state,
                   last_seen=NOW)  # fmt: skip


def test_fake_backend_is_a_collector_backend() -> None:
    backend: CollectorBackend = FakeBackend()  # mypy checks the structural match
    assert backend.fleet_totals().ingest == IngestCounters()


def test_fake_backend_acknowledges_a_repeat_as_duplicate_and_keeps_one_copy() -> None:
    backend = FakeBackend()
    first = backend.ingest(make_batch(), b"{}", NOW)
    second = backend.ingest(make_batch(), b"{}", NOW)
    assert (first.status, second.status) == ("accepted", "duplicate")
    assert len(backend.ingested) == 1
