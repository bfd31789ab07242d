"""The shipper against a real HTTP collector on 127.0.0.1 that acts like DESIGN §3 says.

The fake collector decodes the gzipped batch with the wire contract, checks the bearer
token, acknowledges ``(node, agent_boot_id, seq)`` and treats a repeat as a no-op. It
refuses with the collector's error body ``{"error", "field", "reason"}``. Ground
truth is what the test submitted: every sample must arrive exactly once, in order.
"""

from __future__ import annotations

import gzip
import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

import msgspec

from agent.config import ShipperSettings
from agent.model import Batch, BatchAck, GpuInfo, GpuSample, decode_batch
from agent.shipper import Shipper
from agent.stats import AgentStats

TOKEN = "s3cret-token-value"
GPUS = [GpuInfo(uuid="GPU-a", index=0, name="H100"), GpuInfo(uuid="GPU-b", index=1, name="H100")]


@dataclass
class FakeCollector:
    """A collector on 127.0.0.1: ``answer`` None accepts; an int answers that status, with
    the collector's error body naming ``reason`` (or ``answer_body`` as it is)."""

    token: str | None = TOKEN
    answer: int | None = None
    reason: str | None = None
    answer_body: bytes | None = None
    answer_headers: dict[str, str] = field(default_factory=dict)
    #: answer 422 invalid_value to these seqs (a batch the collector refuses for good)
    reject_seqs: set[int] = field(default_factory=set)
    #: answer 413 too_large to a batch of more samples than this
    max_samples: int | None = None
    #: what acks say of accepted batches
    ack_samples_late: int = 0
    ack_warnings: tuple[str, ...] = ()
    #: record the batch, then hang up without answering (a lost ack)
    hang_up_after_accept: bool = False
    on_accept: Callable[[Batch], object] | None = None
    clock: Callable[[], float] = time.time
    accepted: list[Batch] = field(default_factory=list)
    duplicates: int = 0
    attempt_times: list[float] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    _seen: set[tuple[str, str, int]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None

    def samples(self) -> list[float]:
        return [s.timestamp for b in self.accepted for s in b.samples]

    def handle(self, headers: dict[str, str], body: bytes) -> tuple[int, bytes] | None:
        with self._lock:
            self.attempt_times.append(self.clock())
            self.headers.append(headers)
            if headers.get("authorization") != f"Bearer {self.token}":
                return 401, refusal("missing or invalid bearer token", "unauthorized")
            if self.answer is not None:
                body = self.answer_body or refusal("collector unavailable", self.reason)
                return self.answer, body
            try:
                batch = decode_batch(gzip.decompress(body))
            except (OSError, msgspec.DecodeError) as err:
                return 422, refusal(str(err), "malformed")
            if batch.seq in self.reject_seqs:
                return 422, refusal("samples[0].power_watts: expected a number", "invalid_value")
            if self.max_samples is not None and len(batch.samples) > self.max_samples:
                return 413, refusal(f"at most {self.max_samples} samples", "too_large")
            return self._ack(batch)

    def _ack(self, batch: Batch) -> tuple[int, bytes] | None:
        key = (batch.node, batch.agent_boot_id, batch.seq)
        status: Literal["accepted", "duplicate"] = "duplicate" if key in self._seen else "accepted"
        if status == "accepted":
            self._seen.add(key)
            self.accepted.append(batch)
            if self.on_accept is not None:
                self.on_accept(batch)
        else:
            self.duplicates += 1
        if self.hang_up_after_accept:
            return None
        ack = BatchAck(
            status=status,
            node=batch.node,
            agent_boot_id=batch.agent_boot_id,
            seq=batch.seq,
            samples_late=self.ack_samples_late,
            warnings=self.ack_warnings,
        )
        return 200, msgspec.json.encode(ack)


def refusal(error: str, reason: str | None) -> bytes:
    """The collector's error body (collector/http/responses.py)."""
    return json.dumps({"error": error, "field": None, "reason": reason}).encode()


def _handler(collector: FakeCollector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/batches":
                self._reply(404, b"{}")
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = collector.handle(headers, body)
            if answer is not None:
                self._reply(*answer)

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            for name, value in collector.answer_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def settings_for(collector: FakeCollector, spool_dir: Path, **overrides: object) -> ShipperSettings:
    base = ShipperSettings(
        url=collector.url,
        spool_dir=spool_dir,
        request_timeout_seconds=2.0,
        initial_backoff_seconds=0.01,
        max_backoff_seconds=0.05,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def ticks(start: int, count: int) -> list[list[GpuSample]]:
    """``count`` ticks of one sample per GPU; timestamps are unique and increasing."""
    return [
        [
            GpuSample(timestamp=float(t) + g / 10, gpu_uuid=gpu.uuid, power_watts=100.0 + t)
            for g, gpu in enumerate(GPUS)
        ]
        for t in range(start, start + count)
    ]


def timestamps(batches: list[list[GpuSample]]) -> list[float]:
    return [s.timestamp for tick in batches for s in tick]


def test_a_batch_arrives_gzipped_with_token_identity_and_gpus(
    collector: FakeCollector, tmp_path: Path
) -> None:
    stats = AgentStats()
    shipper = Shipper(
        settings_for(collector, tmp_path),
        "node-1",
        stats,
        token=TOKEN,
        node_labels={"region": "eu"},
    )
    sent = ticks(0, 3)
    for tick in sent:
        shipper.submit(GPUS, tick)

    assert shipper.flush() == 1

    [batch] = collector.accepted
    assert (batch.node, batch.agent_boot_id, batch.seq) == ("node-1", shipper.boot_id, 1)
    assert batch.gpus == tuple(GPUS)
    assert batch.node_labels == {"region": "eu"}
    assert [s.timestamp for s in batch.samples] == timestamps(sent)
    headers = collector.headers[0]
    assert headers["content-encoding"] == "gzip"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("gpufleet-agent/")
    assert list(tmp_path.iterdir()) == []
    snap = stats.snapshot()
    assert (snap.batches_sent_total, snap.samples_sent_total, snap.spool_batches) == (1, 6, 0)
    shipper.close()


def test_an_empty_buffer_sends_nothing(collector: FakeCollector, tmp_path: Path) -> None:
    shipper = Shipper(settings_for(collector, tmp_path), "node-1", AgentStats(), token=TOKEN)
    assert shipper.flush() == 0
    assert collector.attempt_times == []
    shipper.close()


def test_a_long_buffer_is_cut_into_batches_with_consecutive_seqs(
    collector: FakeCollector, tmp_path: Path
) -> None:
    settings = settings_for(collector, tmp_path, max_samples_per_batch=5)
    shipper = Shipper(settings, "node-1", AgentStats(), token=TOKEN)
    sent = ticks(0, 6)
    for tick in sent:
        shipper.submit(GPUS, tick)

    assert shipper.flush() == 3

    assert [b.seq for b in collector.accepted] == [1, 2, 3]
    assert [len(b.samples) for b in collector.accepted] == [5, 5, 2]
    assert collector.samples() == timestamps(sent)
    shipper.close()


def test_a_refusing_then_vanished_collector_gets_every_sample_once_in_order(
    collector: FakeCollector, tmp_path: Path
) -> None:
    stats = AgentStats()
    shipper = Shipper(settings_for(collector, tmp_path), "node-1", stats, token=TOKEN)
    sent = ticks(0, 10)
    collector.answer = 503
    for tick in sent[:4]:
        shipper.submit(GPUS, tick)
        assert shipper.flush() == 0
    collector.stop()  # connection refused from here on
    for tick in sent[4:7]:
        shipper.submit(GPUS, tick)
        assert shipper.flush() == 0
    assert len(list(tmp_path.iterdir())) == 7
    assert stats.snapshot().spool_batches == 7

    collector.answer = None
    collector.start()
    for tick in sent[7:]:
        shipper.submit(GPUS, tick)
    assert shipper.flush() == 8

    assert collector.samples() == timestamps(sent)
    assert [b.seq for b in collector.accepted] == list(range(1, 9))
    assert list(tmp_path.iterdir()) == []
    assert stats.snapshot().samples_sent_total == 20
    shipper.close()


def test_an_agent_restart_mid_outage_loses_and_repeats_nothing(
    collector: FakeCollector, tmp_path: Path
) -> None:
    sent = ticks(0, 9)
    collector.stop()
    first = Shipper(settings_for(collector, tmp_path), "node-1", AgentStats(), token=TOKEN)
    for tick in sent[:3]:
        first.submit(GPUS, tick)
        first.flush()
    first.submit(GPUS, sent[3])
    first.close()  # SIGTERM: the buffered tick goes to the spool too

    second = Shipper(settings_for(collector, tmp_path), "node-1", AgentStats(), token=TOKEN)
    assert second.boot_id != first.boot_id
    for tick in sent[4:6]:
        second.submit(GPUS, tick)
        second.flush()
    collector.start()
    for tick in sent[6:]:
        second.submit(GPUS, tick)
    assert second.flush() == 7

    assert collector.samples() == timestamps(sent)
    identities = [(b.agent_boot_id, b.seq) for b in collector.accepted]
    assert identities == [(first.boot_id, n) for n in (1, 2, 3, 4)] + [
        (second.boot_id, n) for n in (1, 2, 3)
    ]
    second.close()


def test_a_crash_after_the_collector_accepted_resends_a_duplicate_counted_once(
    collector: FakeCollector, tmp_path: Path
) -> None:
    snapshot = tmp_path / "snapshot"
    spool_dir = tmp_path / "spool"
    # While the collector handles the batch, its spool file still exists: copy it, and
    # put it back afterwards, as if the agent died before removing it.
    collector.on_accept = lambda _: shutil.copytree(spool_dir, snapshot)
    first = Shipper(settings_for(collector, spool_dir), "node-1", AgentStats(), token=TOKEN)
    first.submit(GPUS, ticks(0, 1)[0])
    assert first.flush() == 1
    first.close()
    shutil.rmtree(spool_dir)
    shutil.copytree(snapshot, spool_dir)

    second = Shipper(settings_for(collector, spool_dir), "node-1", AgentStats(), token=TOKEN)
    assert second.flush() == 1

    assert collector.duplicates == 1
    assert len(collector.accepted) == 1
    assert list(spool_dir.iterdir()) == []
    second.close()


def test_a_lost_ack_is_resent_and_acknowledged_as_duplicate(
    collector: FakeCollector, tmp_path: Path
) -> None:
    stats = AgentStats()
    shipper = Shipper(settings_for(collector, tmp_path), "node-1", stats, token=TOKEN)
    sent = ticks(0, 2)
    collector.hang_up_after_accept = True
    shipper.submit(GPUS, sent[0])
    assert shipper.flush() == 0
    collector.hang_up_after_accept = False
    shipper.submit(GPUS, sent[1])

    assert shipper.flush() == 2

    assert collector.samples() == timestamps(sent)
    assert collector.duplicates == 1
    assert stats.snapshot().samples_sent_total == 4
    shipper.close()


def test_a_close_with_the_collector_down_keeps_the_buffer_and_returns_fast(
    collector: FakeCollector, tmp_path: Path
) -> None:
    collector.stop()
    shipper = Shipper(settings_for(collector, tmp_path), "node-1", AgentStats(), token=TOKEN)
    shipper.submit(GPUS, ticks(0, 1)[0])
    started = time.monotonic()
    shipper.close()
    assert time.monotonic() - started < 3.0

    collector.start()
    later = Shipper(settings_for(collector, tmp_path), "node-1", AgentStats(), token=TOKEN)
    assert later.flush() == 1
    assert collector.samples() == timestamps(ticks(0, 1))
    later.close()


def test_run_returns_promptly_when_stopped(collector: FakeCollector, tmp_path: Path) -> None:
    settings = settings_for(collector, tmp_path, batch_interval_seconds=3600.0)
    shipper = Shipper(settings, "node-1", AgentStats(), token=TOKEN)
    stop = threading.Event()
    thread = threading.Thread(target=shipper.run, args=(stop,))
    thread.start()
    stop.set()
    thread.join(timeout=2.0)
    assert not thread.is_alive()
    shipper.submit(GPUS, ticks(0, 1)[0])
    shipper.close()
    assert collector.samples() == timestamps(ticks(0, 1))
