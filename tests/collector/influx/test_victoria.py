"""The InfluxDB sink against a real server speaking the InfluxDB v2 write API on loopback
(victoria-metrics, started and stopped here): values read back exactly, and an outage."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.types import ASGIApp

from agent.model import Batch, GpuInfo, GpuSample, Workload, WorkloadKind, encode_batch
from collector.config import CollectorSettings, LedgerSettings
from collector.influx.settings import InfluxSettings
from collector.influx.sink import InfluxSink
from collector.influx.writer import InfluxWriter
from collector.records import HOUR_SECONDS
from gpufleet.cli.collector import build_collector
from tests.collector.influx.influx_server import Series, VictoriaMetrics, free_port

pytestmark = pytest.mark.slow

MODEL = "NVIDIA H100 80GB HBM3"
TRAIN = Workload(kind=WorkloadKind.KUBERNETES_POD, id="u1", namespace="ml", name="train")
NOTEBOOK = Workload(kind=WorkloadKind.KUBERNETES_POD, id="u2", namespace="ml", name="notebook")
STEP_SECONDS = 10
#: three hours ago, on the hour: old enough to be past, recent enough for any retention
HOUR0 = (int(time.time()) // 3600 - 3) * 3600
#: the outage test's first second: its 22,000 one-second samples end 3 hours ago
OUTAGE0 = HOUR0 - 22_000


@pytest.fixture
def victoria(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    server = VictoriaMetrics(tmp_path / "vm")
    server.start()
    yield server
    server.stop()


def sample(gpu: str, i: int) -> GpuSample:
    """GPU-a trains (300 W, 3000 J per step); GPU-b idles in a notebook (600 J per step)."""
    busy = gpu == "GPU-a"
    return GpuSample(
        timestamp=float(HOUR0 + i * STEP_SECONDS),
        gpu_uuid=gpu,
        sm_activity=0.875 if busy else 0.0,
        dram_activity=0.25 if busy else 0.0,
        power_watts=(300.0 + (i % 7) * 0.125) if busy else (60.0 + (i % 3) * 0.5),
        energy_joules=(5e6 + 3000.0 * i) if busy else (2e6 + 600.0 * i),
        temperature_celsius=61.5 if busy else 35.0,
        memory_used_bytes=(40 if busy else 2) * 2**30,
        workloads=(TRAIN if busy else NOTEBOOK,),
    )


def fleet_batches(steps: int, per_batch: int) -> list[Batch]:
    gpus = tuple(GpuInfo(uuid=u, index=n, name=MODEL) for n, u in enumerate(("GPU-a", "GPU-b")))
    return [
        Batch(
            schema_version=1, node="node-1", agent_boot_id="boot", seq=seq, sent_at=0.0,
            gpus=gpus,
            samples=tuple(
                sample(gpu, i)
                for i in range(first, min(first + per_batch, steps))
                for gpu in ("GPU-a", "GPU-b")
            ),
        )
        for seq, first in enumerate(range(0, steps, per_batch))
    ]  # fmt: skip


async def get_text(app: ASGIApp, path: str) -> str:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://collector") as client:
        response = await client.get(path)
        response.raise_for_status()
        return response.text


def wait_until(condition: Callable[[], bool], timeout_seconds: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def as_points(series: list[Series], name: str) -> dict[tuple[str, int], float]:
    """(uuid or workload, timestamp ms) -> value, for the series ``<measurement>_<field>``."""
    return {
        (s.labels.get("uuid") or s.labels["workload"], ts): value
        for s in series
        if s.labels["__name__"] == name
        for ts, value in zip(s.timestamps_ms, s.values, strict=True)
    }


def test_collector_writes_raw_samples_and_hourly_rollups_read_back_exactly(
    victoria: VictoriaMetrics, tmp_path: Path
) -> None:
    steps = 2 * 360 + 1  # two hours of 10 s samples, both ends included
    now = float(HOUR0 + 2 * 3600 + 60)
    settings = CollectorSettings(
        ledger=LedgerSettings(url=str(tmp_path / "ledger.db")),
        influx=InfluxSettings(
            url=victoria.url, token="t", org="gpufleet", bucket="fleet",
            flush_interval_seconds=0.05,
        ),
    )  # fmt: skip
    collector = build_collector(settings, lambda: now, tokens=frozenset({"t"}))
    try:
        for batch in fleet_batches(steps, per_batch=30):
            collector.core.service.submit(encode_batch(batch), None, now).result(10)
        collector.core.applier.tick(flush=True)
        ledger_hours = {
            (hour, ref.key): usage
            for hour in (HOUR0, HOUR0 + HOUR_SECONDS)
            for ref, usage in collector.ledger.usage_by_workload(hour, hour + HOUR_SECONDS)
        }
        sink = collector.influx
        assert sink is not None
        wait_until(lambda: sink.counters().queued == 0)
        metrics = asyncio.run(get_text(collector.app, "/metrics"))
    finally:
        collector.stop()
    assert f"gpufleet_influx_points_written_total {2 * steps + 4}.0" in metrics

    raw = victoria.export('{__name__=~"gpu_.*", node="node-1"}')
    for s in raw:
        assert s.labels["model"] == MODEL
        want = "pod:ml/train" if s.labels["uuid"] == "GPU-a" else "pod:ml/notebook"
        assert s.labels["workload"] == want
    for field in ("power_watts", "energy_joules", "sm_activity", "dram_activity",
                  "temperature_celsius", "memory_used_bytes"):  # fmt: skip
        sent = {
            (gpu, (HOUR0 + i * STEP_SECONDS) * 1000): float(getattr(sample(gpu, i), field))
            for i in range(steps)
            for gpu in ("GPU-a", "GPU-b")
        }
        assert as_points(raw, f"gpu_{field}") == sent, field

    rollups = victoria.export('{__name__=~"workload_hour_.*"}')
    assert {s.labels["currency"] for s in rollups} == {collector.core.service.rates.currency}
    hours_ms = [HOUR0 * 1000, (HOUR0 + 3600) * 1000]
    # ground truth from the samples: 360 intervals per hour, each holder all of it
    truth = {
        "energy_joules": {"pod:ml/train": 360 * 3000.0, "pod:ml/notebook": 360 * 600.0},
        "active_seconds": {"pod:ml/train": 3600.0, "pod:ml/notebook": 0.0},
        "idle_seconds": {"pod:ml/train": 0.0, "pod:ml/notebook": 3600.0},
        "idle_energy_joules": {"pod:ml/train": 0.0, "pod:ml/notebook": 360 * 600.0},
    }
    for field, per_workload in truth.items():
        want = {(w, h): v for w, v in per_workload.items() for h in hours_ms}
        assert as_points(rollups, f"workload_hour_{field}") == want, field
    for field in ("cost", "idle_cost", "carbon_grams"):
        got = as_points(rollups, f"workload_hour_{field}")
        ledger = {
            (key, int(hour) * 1000): getattr(u, field) for (hour, key), u in ledger_hours.items()
        }
        assert got.keys() == ledger.keys()
        # victoria-metrics keeps 12 significant decimal digits of a float
        print(field, [(got[k], ledger[k]) for k in got])
        assert got == pytest.approx(ledger, rel=1e-11, abs=0), field
        assert all(v > 0 for v in got.values()) or field == "idle_cost", field


def one_gpu_bodies(first: int, batches: int, per_batch: int) -> list[bytes]:
    """JSON bodies of ``batches`` batches of one GPU, one sample per second from ``first``."""
    gpu = GpuInfo(uuid="GPU-o", index=0, name=MODEL)
    return [
        encode_batch(
            Batch(
                schema_version=1, node="node-o", agent_boot_id="boot", seq=b, sent_at=0.0,
                gpus=(gpu,),
                samples=tuple(
                    GpuSample(timestamp=float(OUTAGE0 + s), gpu_uuid="GPU-o", power_watts=250.0)
                    for s in range(first + b * per_batch, first + (b + 1) * per_batch)
                ),
            )
        )
        for b in range(batches)
    ]  # fmt: skip


def test_outage_ingest_keeps_its_speed_and_the_drop_counter_equals_what_was_lost(
    victoria: VictoriaMetrics,
) -> None:
    per_batch, bound = 50, 5000
    settings = InfluxSettings(
        url=victoria.url, org="gpufleet", bucket="fleet", queue_max_points=bound,
        batch_points=500, flush_interval_seconds=0.02, timeout_seconds=2,
        retry_initial_seconds=0.05, retry_max_seconds=0.2,
    )  # fmt: skip
    sink = InfluxSink(InfluxWriter(settings, "token"), settings, lambda start, end: [])
    sink.start()
    before = one_gpu_bodies(0, 20, per_batch)  # 1,000 points while up
    outage = one_gpu_bodies(1000, 400, per_batch)  # 20,000 while down
    after = one_gpu_bodies(21000, 20, per_batch)  # 1,000 after the restart
    try:
        for body in before:
            sink.add_batch(body, per_batch)
        wait_until(lambda: sink.counters().written == 1000)

        victoria.stop()
        for body in outage:  # full speed, no pause
            sink.add_batch(body, per_batch)
        failures = sink.counters().write_failures
        wait_until(lambda: sink.counters().write_failures >= failures + 2)  # settled
        during = sink.counters()

        victoria.start()
        wait_until(lambda: sink.counters().queued == 0)  # the backlog, by itself
        for body in after:
            sink.add_batch(body, per_batch)
        wait_until(lambda: sink.counters().queued == 0)
    finally:
        sink.close()

    assert during.queued == bound and during.dropped == {"overflow": 20_000 - bound}

    end = sink.counters()
    sent = 22_000
    assert end.enqueued == sent == end.written + sum(end.dropped.values()) + end.queued
    stored = victoria.wait_for_samples('gpu_power_watts{node="node-o"}', end.written)
    assert stored == end.written == 1000 + bound + 1000
    assert sum(end.dropped.values()) == sent - stored == 15_000
    [series] = victoria.export('gpu_power_watts{node="node-o"}')
    kept = sorted(set(series.timestamps_ms))
    # what was lost is the oldest of the outage; everything after the restart arrived
    want = [*range(0, 1000), *range(21000 - bound, 21000), *range(21000, 22000)]
    assert kept == [(OUTAGE0 + s) * 1000 for s in want]


def test_collector_results_do_not_depend_on_influx_being_up(tmp_path: Path) -> None:
    """The same fleet through a collector whose InfluxDB never answers: same ledger."""
    steps, now = 361, float(HOUR0 + 3600 + 60)
    totals = []
    for name, url in (("off", ""), ("down", f"http://127.0.0.1:{free_port()}")):
        influx = InfluxSettings(url=url, database="fleet" if url else "", timeout_seconds=1)
        settings = CollectorSettings(
            ledger=LedgerSettings(url=str(tmp_path / f"{name}.db")), influx=influx
        )
        collector = build_collector(settings, lambda: now, tokens=frozenset({"t"}))
        try:
            for batch in fleet_batches(steps, per_batch=30):
                ack = collector.core.service.submit(encode_batch(batch), None, now).result(10)
                assert ack.status == "accepted"
            collector.core.applier.tick(flush=True)
            totals.append(collector.ledger.usage_by_workload(HOUR0, HOUR0 + HOUR_SECONDS))
        finally:
            collector.stop()
        if url:
            assert collector.influx is not None
            c = collector.influx.counters()
            assert (c.written, c.enqueued) == (0, 2 * steps + 2)
    assert totals[0] == totals[1]
    by_key = {ref.key: usage for ref, usage in totals[1]}
    assert by_key["pod:ml/train"].energy_joules == 360 * 3000.0
    assert by_key["pod:ml/notebook"].idle_seconds == 3600.0
