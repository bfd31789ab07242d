"""Ships samples to the collector: batches, gzip, bearer token, retries, and a spool.

Every batch goes to the on-disk spool before it is sent, and leaves it only when the
collector acknowledges it (or rejects it for good), so a collector outage or an agent
restart loses nothing. The collector treats ``(node, agent_boot_id, seq)`` as the batch's
identity and acknowledges a repeat as a duplicate, so resending after any doubt is safe.

Outcomes of one POST:
- 2xx with a matching BatchAck: delivered; the spool file is removed.
- 401/403: the token is refused; the batch stays, error logged once per streak, back off.
- 413 and other 4xx about the batch itself (400, 422, ...): retrying can never succeed;
  the batch is dropped, logged with the collector's message and counted, and the batches
  behind it go on.
- 5xx, endpoint-level 4xx (404, 429, ...), bad acks, network errors and timeouts: the
  batch stays and the shipper backs off.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from agent import __version__
from agent.config import ShipperSettings
from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from agent.shipping_policy import (
    ShipOutcome,
    backoff_delay,
    batch_headers,
    classify,
    collector_message,
    is_ack_for,
)
from agent.spool import Spool, SpoolError, gzip_batch
from agent.stats import AgentStats
from gpufleet.settings import ConfigError, read_secret

log = logging.getLogger(__name__)

#: the most close() spends sending, so shutdown is never held up for long
CLOSE_BUDGET_SECONDS = 2.0


def read_token(settings: ShipperSettings) -> str | None:
    """The bearer token: the contents of ``token_file`` when set, else ``token``."""
    return read_secret(settings.token, settings.token_file, "shipper.token_file")


@dataclass(frozen=True)
class _SendResult:
    acked: int
    failed: bool


class Shipper:
    """Buffers samples, spools them as batches and sends the spool to the collector.

    ``submit`` is called by the sampler every tick; ``run`` is the shipping thread's loop;
    ``close`` is called once at shutdown, after ``run`` has returned. ``clock`` gives Unix
    seconds for batch and spool time stamps; ``rng`` drives the backoff jitter.
    """

    def __init__(
        self,
        settings: ShipperSettings,
        node: str,
        stats: AgentStats,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        node_labels: dict[str, str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if settings.url is None:
            raise ConfigError("shipper.url: required to ship batches (or disable the shipper)")
        self.boot_id = str(uuid.uuid4())
        self._settings = settings
        self._node = node
        self._stats = stats
        self._token_from_file = token is None and settings.token_file is not None
        self._token = token if token is not None else read_token(settings)
        self._clock = clock
        self._labels = dict(node_labels or {})
        self._rng = rng or random.Random()
        self._endpoint = settings.url.rstrip("/") + "/v1/batches"
        self._spool = _open_spool(settings, stats, clock)
        self._client = httpx.Client(transport=transport, timeout=settings.request_timeout_seconds)
        self._seq = 0
        self._gpus: tuple[GpuInfo, ...] = ()
        self._samples: list[GpuSample] = []
        self._unspooled: list[Batch] = []
        self._buffer_lock = threading.Lock()
        self._spool_lock = threading.Lock()
        self._send_lock = threading.Lock()
        #: failure kinds already logged in the current streak of failures
        self._complaints: set[str] = set()

    def submit(self, gpus: Sequence[GpuInfo], samples: Sequence[GpuSample]) -> None:
        """Buffer one tick's samples; ``gpus`` replaces the GPU set sent with batches."""
        with self._buffer_lock:
            self._gpus = tuple(gpus)
            self._samples.extend(samples)

    def flush(self) -> int:
        """Spool the buffer, then send the spool oldest first; returns batches acked."""
        with self._send_lock:
            self._spool_buffer()
            return self._send_all(self._settings.request_timeout_seconds, None).acked

    def run(self, stop: threading.Event) -> None:
        """Spool every batch interval and send; back off while sends fail. Returns on stop."""
        interval = self._settings.batch_interval_seconds
        spool_in = send_in = interval
        failures = 0
        while not stop.wait(step := min(spool_in, send_in)):
            spool_in -= step
            send_in -= step
            if spool_in <= 0:
                self._spool_buffer()
                spool_in = interval
            if send_in > 0:
                continue
            failures = 0 if self._send_guarded() else failures + 1
            send_in = self._backoff(failures) if failures else spool_in

    def close(self) -> None:
        """Spool what is buffered and try one short send; the spool keeps the rest."""
        self._spool_buffer()
        if not self._send_lock.acquire(timeout=CLOSE_BUDGET_SECONDS):
            log.warning("shipper: a send is still running at shutdown; the spool keeps the batches")
            return
        try:
            deadline = time.monotonic() + CLOSE_BUDGET_SECONDS
            self._send_all(CLOSE_BUDGET_SECONDS, deadline)
        finally:
            self._send_lock.release()
            self._client.close()

    def _send_guarded(self) -> bool:
        """One pass over the spool; True when nothing had to wait. Never raises."""
        try:
            with self._send_lock:
                return not self._send_all(self._settings.request_timeout_seconds, None).failed
        except Exception:  # the shipping thread must outlive any bug; the spool keeps data
            log.exception("shipper: unexpected error while sending; retrying later")
            return False

    def _backoff(self, failures: int) -> float:
        s = self._settings
        return backoff_delay(failures, s.initial_backoff_seconds, s.max_backoff_seconds, self._rng)

    def _spool_buffer(self) -> None:
        with self._spool_lock:
            with self._buffer_lock:
                gpus, samples, self._samples = self._gpus, self._samples, []
            for batch in self._cut(gpus, samples):
                try:
                    self._spool.append(batch)
                except SpoolError as err:
                    log.error("shipper: %s; batch %d is held in memory only", err, batch.seq)
                    self._unspooled.append(batch)

    def _cut(self, gpus: tuple[GpuInfo, ...], samples: list[GpuSample]) -> list[Batch]:
        size = self._settings.max_samples_per_batch
        return [self._batch(gpus, samples[i : i + size]) for i in range(0, len(samples), size)]

    def _batch(self, gpus: tuple[GpuInfo, ...], samples: list[GpuSample]) -> Batch:
        self._seq += 1
        return Batch(
            schema_version=SCHEMA_VERSION,
            node=self._node,
            agent_boot_id=self.boot_id,
            seq=self._seq,
            sent_at=self._clock(),
            gpus=gpus,
            samples=tuple(samples),
            agent_version=__version__,
            node_labels=self._labels,
        )

    def _send_all(self, timeout: float, deadline: float | None) -> _SendResult:
        """Send spooled batches oldest first, stopping at the first that must wait."""
        with self._spool_lock:
            entries = self._spool.pending()
        acked = 0
        for entry in entries:
            if deadline is not None and time.monotonic() >= deadline:
                return _SendResult(acked, failed=True)
            with self._spool_lock:
                body = self._spool.read_body(entry)
            if body is None:
                continue
            outcome = self._deliver(body, entry.boot_id, entry.seq, timeout)
            if outcome in (ShipOutcome.UNAUTHORIZED, ShipOutcome.RETRY):
                self._drop_unspooled()
                return _SendResult(acked, failed=True)
            with self._spool_lock:
                self._spool.remove(entry)
            acked += self._settle(outcome, entry.samples)
        return self._send_unspooled(acked, timeout)

    def _send_unspooled(self, acked: int, timeout: float) -> _SendResult:
        # Batches the spool could not hold (disk full): one chance, then they are lost.
        with self._spool_lock:
            batches, self._unspooled = self._unspooled, []
        failed = False
        for batch in batches:
            outcome = self._deliver(gzip_batch(batch), batch.agent_boot_id, batch.seq, timeout)
            failed = failed or outcome in (ShipOutcome.UNAUTHORIZED, ShipOutcome.RETRY)
            acked += self._settle(outcome, len(batch.samples))
        return _SendResult(acked, failed)

    def _drop_unspooled(self) -> None:
        with self._spool_lock:
            batches, self._unspooled = self._unspooled, []
        for batch in batches:
            log.error("shipper: batch %d was in memory only and could not be sent; lost", batch.seq)
            self._settle(ShipOutcome.REJECTED, len(batch.samples))

    def _settle(self, outcome: ShipOutcome, samples: int) -> int:
        """Count a batch that left the spool; 1 when it was acked."""
        if outcome is ShipOutcome.ACKED:
            self._stats.record_batch_sent(samples)
            return 1
        self._stats.record_spool_drop(1, samples)
        return 0

    def _deliver(self, body: bytes, boot_id: str, seq: int, timeout: float) -> ShipOutcome:
        try:
            response = self._client.post(
                self._endpoint, content=body, headers=batch_headers(self._token), timeout=timeout
            )
        except httpx.HTTPError as err:
            return self._fail(ShipOutcome.RETRY, "network", f"collector unreachable: {err!r}")
        return self._judge(response, boot_id, seq)

    def _judge(self, response: httpx.Response, boot_id: str, seq: int) -> ShipOutcome:
        code = response.status_code
        outcome = classify(code)
        if outcome is ShipOutcome.ACKED:
            if is_ack_for(response.content, boot_id, seq):
                self._complaints.clear()
                return ShipOutcome.ACKED
            return self._fail(ShipOutcome.RETRY, "ack", f"HTTP {code} without an ack for seq {seq}")
        if outcome is ShipOutcome.UNAUTHORIZED:
            self._reload_token()
            return self._fail(outcome, "auth", f"the collector refused the token (HTTP {code})")
        if outcome is ShipOutcome.REJECTED:
            self._stats.record_batch_failed()
            log.error(
                "shipper: the collector rejected batch %s/%d for good (HTTP %d: %s); dropped",
                boot_id,
                seq,
                code,
                collector_message(response),
            )
            return outcome
        return self._fail(outcome, f"http-{code}", f"HTTP {code}: {collector_message(response)}")

    def _fail(self, outcome: ShipOutcome, kind: str, message: str) -> ShipOutcome:
        self._stats.record_batch_failed()
        if kind not in self._complaints:
            self._complaints.add(kind)
            level = logging.ERROR if outcome is ShipOutcome.UNAUTHORIZED else logging.WARNING
            log.log(level, "shipper: %s; batches stay spooled and are retried", message)
        return outcome

    def _reload_token(self) -> None:
        # A mounted secret may have been rotated since start-up.
        if not self._token_from_file:
            return
        try:
            self._token = read_token(self._settings)
        except ConfigError as err:
            log.error("shipper: %s; keeping the previous token", err)


def _open_spool(settings: ShipperSettings, stats: AgentStats, clock: Callable[[], float]) -> Spool:
    s = settings
    try:
        return Spool(s.spool_dir, s.spool_max_bytes, s.spool_max_age_seconds, stats, clock)
    except SpoolError as err:
        raise ConfigError(f"shipper.spool_dir: {err}") from err
