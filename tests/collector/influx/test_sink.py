"""The sink's queue, worker and accounting, against an in-memory InfluxDB stand-in."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.model import Batch, GpuInfo, GpuSample, Workload, WorkloadKind, encode_batch
from collector.accounting.rates import Rates
from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.config import CarbonSettings, CollectorSettings
from collector.influx.hooks import InfluxObserver, InfluxSinkMetrics
from collector.influx.settings import InfluxSettings
from collector.influx.sink import InfluxSink, InfluxWriteError
from collector.ledger.store import Ledger
from collector.records import Usage, WorkloadRef
from collector.service import CollectorCore

T0 = 1_700_000_000.0
HOUR = 1_699_999_200.0  # T0's hour


class FakeInflux:
    """Keeps what it is sent; ``up`` cleared = connection refused; ``reject`` = HTTP 400."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.up = threading.Event()
        self.up.set()
        self.reject = False
        self.closed = False
        #: cleared = a write hangs (a wedged server) until it is set again
        self.answering = threading.Event()
        self.answering.set()
        self.hanging = threading.Event()

    def write(self, lines: Sequence[str]) -> None:
        if not self.answering.is_set():
            self.hanging.set()
            self.answering.wait()
        if self.reject:
            raise InfluxWriteError("HTTP 400: partial write", retryable=False)
        if not self.up.is_set():
            raise InfluxWriteError("connection refused", retryable=True)
        self.lines.extend(lines)

    def close(self) -> None:
        self.closed = True

    def timestamps(self) -> list[int]:
        return [int(line.rsplit(" ", 1)[1]) for line in self.lines]


def settings(**overrides: float) -> InfluxSettings:
    values: dict[str, float] = {
        "queue_max_points": 100,
        "batch_points": 10,
        "flush_interval_seconds": 0.01,
        "retry_initial_seconds": 0.005,
        "retry_max_seconds": 0.02,
    }
    values.update(overrides)
    return InfluxSettings(url="http://influx", database="fleet", **values)  # type: ignore[arg-type]


POD = Workload(kind=WorkloadKind.KUBERNETES_POD, id="p", name="nb", namespace="ml")


def batch_body(first: int, samples: int, holder: Workload | None = None) -> bytes:
    """``samples`` samples of one GPU, one per second from T0 + ``first``, held by
    ``holder``."""
    gpu = GpuInfo(uuid="GPU-a", index=0, name="NVIDIA H100")
    held = (holder,) if holder is not None else ()
    return encode_batch(
        Batch(
            schema_version=1, node="n1", agent_boot_id="b", seq=first, sent_at=T0,
            gpus=(gpu,),
            samples=tuple(
                GpuSample(timestamp=T0 + first + i, gpu_uuid="GPU-a", power_watts=100.0,
                          workloads=held)
                for i in range(samples)
            ),
        )
    )  # fmt: skip


def wait_until(condition: Callable[[], bool], timeout_seconds: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.002)


def no_rollups(start: float, end: float) -> list[tuple[WorkloadRef, Usage]]:
    return []


@pytest.fixture
def influx() -> FakeInflux:
    return FakeInflux()


def test_points_are_written_in_batches(influx: FakeInflux) -> None:
    sink = InfluxSink(influx, settings(), no_rollups)
    sink.start()
    for first in range(0, 95, 5):
        sink.add_batch(batch_body(first, 5), 5)
    wait_until(lambda: sink.counters().written == 95)
    sink.close()
    assert influx.timestamps() == [int(T0 + i) * 10**9 for i in range(95)]
    c = sink.counters()
    assert (c.enqueued, c.written, c.dropped, c.queued, c.write_failures) == (95, 95, {}, 0, 0)
    assert influx.closed


def test_when_influx_is_down_the_oldest_points_are_dropped_and_counted(
    influx: FakeInflux,
) -> None:
    sink = InfluxSink(influx, settings(), no_rollups)
    influx.up.clear()
    sink.start()
    for first in range(0, 250, 5):  # 250 points into a queue of 100
        sink.add_batch(batch_body(first, 5), 5)
        c = sink.counters()
        assert c.enqueued == c.written + sum(c.dropped.values()) + c.queued
    failures = sink.counters().write_failures
    wait_until(lambda: sink.counters().write_failures >= failures + 2)  # settled
    influx.up.set()
    wait_until(lambda: sink.counters().queued == 0)
    sink.close()
    c = sink.counters()
    assert (c.enqueued, c.written, c.dropped) == (250, 100, {"overflow": 150})
    # the newest 100 survived, in order; the 150 oldest are the ones counted as dropped
    assert influx.timestamps() == [int(T0 + i) * 10**9 for i in range(150, 250)]


def test_enqueueing_never_waits_for_a_wedged_influx(influx: FakeInflux) -> None:
    """The writer is stuck inside a write that never answers: ingest keeps enqueueing
    (were add_batch to wait on the writer, this would hang), the queue stays bounded and
    every point is accounted for. The cost per call is measured in bench/, not here."""
    sink = InfluxSink(influx, settings(queue_max_points=10_000, batch_points=1000), no_rollups)
    influx.answering.clear()
    sink.start()
    body = batch_body(0, 8)
    sink.add_batch(body, 8)
    assert influx.hanging.wait(5), "the writer should be inside the wedged write"
    for _ in range(20_000):
        sink.add_batch(body, 8)
    c = sink.counters()
    assert c.written == 0
    assert c.enqueued == 160_008 == c.written + sum(c.dropped.values()) + c.queued
    assert c.queued <= 10_000 + 1000  # the bound, plus the chunk stuck in flight
    assert c.dropped["overflow"] >= 150_000
    influx.answering.set()
    sink.close(timeout_seconds=5)


def test_points_the_server_refuses_are_dropped_not_retried(influx: FakeInflux) -> None:
    influx.reject = True
    sink = InfluxSink(influx, settings(), no_rollups)
    sink.start()
    sink.add_batch(batch_body(0, 7), 7)
    wait_until(lambda: sink.counters().queued == 0)
    time.sleep(0.05)  # a retry would show as a second failure
    sink.close()
    c = sink.counters()
    assert (c.written, c.dropped, c.write_failures) == (0, {"rejected": 7}, 1)


def test_close_writes_what_is_queued_or_counts_it_lost(influx: FakeInflux) -> None:
    sink = InfluxSink(influx, settings(flush_interval_seconds=60), no_rollups)
    sink.start()
    sink.add_batch(batch_body(0, 3), 3)
    sink.close()
    assert sink.counters().written == 3
    down = FakeInflux()
    down.up.clear()
    sink = InfluxSink(down, settings(flush_interval_seconds=60), no_rollups)
    sink.start()
    sink.add_batch(batch_body(0, 3), 3)
    sink.close()
    c = sink.counters()
    assert (c.enqueued, c.written, c.dropped, c.queued) == (3, 0, {"shutdown": 3}, 0)


def test_a_waiting_rollup_is_queued_once_and_carries_the_latest_totals(
    influx: FakeInflux,
) -> None:
    ref = WorkloadRef(key="pod:ml/nb", kind="kubernetes_pod", name="nb", namespace="ml")
    totals = {ref: Usage(idle_seconds=60.0)}

    def read(start: float, end: float) -> list[tuple[WorkloadRef, Usage]]:
        assert (start, end) == (HOUR, HOUR + 3600)
        return list(totals.items())

    influx.up.clear()
    sink = InfluxSink(influx, settings(flush_interval_seconds=60), read, "EUR")
    sink.start()
    sink.add_rollups([(HOUR, ref.key)])
    sink.add_rollups([(HOUR, ref.key)])  # a second commit in the same hour
    totals[ref] = Usage(idle_seconds=120.0)
    influx.up.set()
    sink.close()
    assert sink.counters().enqueued == 1
    [line] = influx.lines
    assert "idle_seconds=120," in line and line.endswith(f" {int(HOUR) * 10**9}")


def test_the_observer_queues_new_batches_and_committed_hours(
    tmp_path: Path, influx: FakeInflux
) -> None:
    """Attached to a real collector core: each newly stored batch's samples are queued
    (a resend is not), and each commit's (hour, workload) rollups, read back from the
    ledger when the hour is written: two commits in one hour are one point."""
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
    core = CollectorCore.build(CollectorSettings(), ledger, rates, lambda: T0 + 8)
    sink = InfluxSink(influx, settings(flush_interval_seconds=60), ledger.usage_by_workload, "EUR")
    core.observers.attach(InfluxObserver(sink))
    sink.start()
    try:
        for body in (batch_body(0, 4, POD), batch_body(0, 4, POD), batch_body(4, 4, POD)):
            core.service.submit(body, None, T0 + 8).result(10)
            core.applier.tick(flush=True)  # one commit per batch, both in T0's hour
    finally:
        core.close()
        sink.close()
        ledger.close()
    assert sink.counters().enqueued == 4 + 4 + 1  # the resend is not queued; one hour
    rollups = [line for line in influx.lines if line.startswith("workload_hour,")]
    assert len(rollups) == 1
    assert "energy_joules=700," in rollups[0]  # 7 s at 100 W, from both commits


def test_metrics_expose_the_counters(influx: FakeInflux) -> None:
    influx.up.clear()
    sink = InfluxSink(influx, settings(queue_max_points=10), no_rollups)
    for first in range(0, 25, 5):  # not started: everything waits in the queue
        sink.add_batch(batch_body(first, 5), 5)
    registry = CollectorRegistry()
    registry.register(InfluxSinkMetrics(sink))
    text = generate_latest(registry).decode()
    assert "gpufleet_influx_points_enqueued_total 25.0" in text
    assert 'gpufleet_influx_points_dropped_total{reason="overflow"} 15.0' in text
    assert 'gpufleet_influx_points_dropped_total{reason="rejected"} 0.0' in text
    assert "gpufleet_influx_points_written_total 0.0" in text
    assert "gpufleet_influx_queue_points 10.0" in text
