"""Ships samples to the collector: batches, gzip, bearer token, retries, and a spool.

Every batch goes to the on-disk spool before it is sent, and leaves it only when the
collector acknowledges it (or refuses it for good), so a collector outage or an agent
restart loses nothing. The collector treats ``(node, agent_boot_id, seq)`` as the batch's
identity and acknowledges a repeat as a duplicate, so resending after any doubt is safe.

Outcomes of one POST (agent/refusals.py has the table of the collector's reasons):
- 2xx with a matching BatchAck: delivered; the spool file is removed. An ack with warnings
  or late samples is logged once per streak; late samples are counted.
- 413 (from the collector or a proxy) for a batch of 2+ samples: the batch is replaced in
  the spool by its two halves (agent/batch_split.py; crash-safe), which are sent at once,
  and later batches are cut no larger than the half. The collector's 413 for one sample:
  dropped.
- The collector refuses the batch for good (malformed, invalid_value, unknown_gpu): the
  batch is dropped, logged with its identity and the collector's message, counted, and
  the batches behind it go on.
- A refusal someone can fix (401/403, the node's clock, the schema version, a limit, a
  reason this agent does not know) or a 4xx that did not come from a gpufleet collector
  (a proxy, a wrong URL): the batch stays, ERROR once per streak saying what to do,
  counted by reason, back off. The batches behind it wait too (they share its clock,
  version and path), until the fix or the spool's size and age bounds.
- 5xx, 408/425/429, bad acks, network errors and timeouts: the batch stays and the shipper
  backs off, for as long as ``Retry-After`` asks when the answer has one (clamped, with
  jitter: shipping_policy.retry_delay).

A batch the spool cannot store (disk full, read-only) waits in memory, bounded (at most
MAX_MEMORY_BATCHES and the spool's byte bound; past it the oldest is dropped), and is sent
like a spooled one on every pass; each one lost is logged and counted.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from agent import __version__
from agent.backlog import Backlog, Item, identity
from agent.config import ShipperSettings
from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, WorkloadHostSample
from agent.shipping_log import ShippingLog
from agent.shipping_policy import (
    ShipOutcome,
    Verdict,
    backoff_delay,
    batch_headers,
    clamp_retry_after,
    judge,
    retry_delay,
)
from agent.spool import Spool, SpoolError
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
    #: the wait the collector asked for with the answer that ended the pass
    retry_after_seconds: float | None = None


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
        self._client = httpx.Client(transport=transport, timeout=settings.request_timeout_seconds)
        self._log = ShippingLog(node, stats)
        spool = _open_spool(settings, stats, clock)
        self._backlog = Backlog(spool, settings.spool_max_bytes, self._log, stats)
        self._seq = 0
        #: lowered after a 413, so later batches are cut no larger than what got through
        self._max_samples = settings.max_samples_per_batch
        self._gpus: tuple[GpuInfo, ...] = ()
        self._samples: list[GpuSample] = []
        self._hosts: list[WorkloadHostSample] = []
        self._buffer_lock = threading.Lock()
        self._cut_lock = threading.Lock()
        self._send_lock = threading.Lock()

    def submit(
        self,
        gpus: Sequence[GpuInfo],
        samples: Sequence[GpuSample],
        hosts: Sequence[WorkloadHostSample] = (),
    ) -> None:
        """Buffer one tick's samples and its workloads' host readings; ``gpus`` replaces
        the GPU set sent with batches."""
        with self._buffer_lock:
            self._gpus = tuple(gpus)
            self._samples.extend(samples)
            self._hosts.extend(hosts)

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
            result = self._send_guarded()
            failures = failures + 1 if result.failed else 0
            send_in = self._wait_after(failures, result) if failures else spool_in

    def close(self) -> None:
        """Spool what is buffered and try one short send; the spool keeps the rest."""
        self._spool_buffer()
        if not self._send_lock.acquire(timeout=CLOSE_BUDGET_SECONDS):
            log.warning("shipper: a send is still running at shutdown; the spool keeps the batches")
            return
        try:
            deadline = time.monotonic() + CLOSE_BUDGET_SECONDS
            self._send_all(CLOSE_BUDGET_SECONDS, deadline)
            self._backlog.lose_memory("the agent stopped before it could be sent or spooled")
        finally:
            self._send_lock.release()
            self._client.close()

    def _send_guarded(self) -> _SendResult:
        """One pass over the spool; ``failed`` when something had to wait. Never raises."""
        try:
            with self._send_lock:
                return self._send_all(self._settings.request_timeout_seconds, None)
        except Exception:  # the shipping thread must outlive any bug; the spool keeps data
            log.exception("shipper: unexpected error while sending; retrying later")
            return _SendResult(0, failed=True)

    def _wait_after(self, failures: int, result: _SendResult) -> float:
        s = self._settings
        if result.retry_after_seconds is not None:
            return retry_delay(result.retry_after_seconds, s.initial_backoff_seconds, self._rng)
        return backoff_delay(failures, s.initial_backoff_seconds, s.max_backoff_seconds, self._rng)

    def _spool_buffer(self) -> None:
        with self._cut_lock:
            with self._buffer_lock:
                gpus, samples, self._samples = self._gpus, self._samples, []
                hosts, self._hosts = (self._hosts, []) if samples else ([], self._hosts)
            for batch in self._cut(gpus, samples, hosts):
                self._backlog.add(batch)

    def _cut(
        self,
        gpus: tuple[GpuInfo, ...],
        samples: list[GpuSample],
        hosts: list[WorkloadHostSample],
    ) -> list[Batch]:
        """Batches of at most ``_max_samples`` samples; the host readings spread over
        them in order, as evenly (a batch holds at most as many as samples, and far fewer
        than the collector's bound of 1,024)."""
        size = self._max_samples
        starts = range(0, len(samples), size)
        per = -(-len(hosts) // len(starts)) if starts else 0
        return [
            self._batch(gpus, samples[i : i + size], hosts[n * per : (n + 1) * per])
            for n, i in enumerate(starts)
        ]

    def _batch(
        self,
        gpus: tuple[GpuInfo, ...],
        samples: list[GpuSample],
        hosts: list[WorkloadHostSample] | None = None,
    ) -> Batch:
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
            hosts=tuple(hosts or ()),
        )

    def _send_all(self, timeout: float, deadline: float | None) -> _SendResult:
        """Send spooled and memory-held batches oldest first, stopping at the first that
        must wait; a batch split after a 413 is followed by its halves."""
        work: deque[Item] = deque(self._backlog.pending())
        acked = 0
        while work:
            if deadline is not None and time.monotonic() >= deadline:
                return _SendResult(acked, failed=True)
            item = work.popleft()
            body = self._backlog.body(item)
            if body is None:
                continue
            boot_id, seq, samples = identity(item)
            verdict = self._deliver(body, boot_id, seq, samples, timeout)
            if verdict.outcome in (ShipOutcome.HELD, ShipOutcome.RETRY):
                return _SendResult(acked, failed=True, retry_after_seconds=self._asked(verdict))
            if verdict.outcome is ShipOutcome.SPLIT:
                parts = self._backlog.split(item, body)
                if parts is None:
                    return _SendResult(acked, failed=True)
                if parts:
                    self._cut_smaller(min(identity(part)[2] for part in parts))
                work.extendleft(reversed(parts))
                continue
            self._backlog.remove(item)
            if verdict.outcome is ShipOutcome.ACKED:  # else ShippingLog counted the loss
                self._stats.record_batch_sent(samples)
                acked += 1
        return _SendResult(acked, failed=False)

    def _asked(self, verdict: Verdict) -> float | None:
        if verdict.retry_after_seconds is None:
            return None
        wait = clamp_retry_after(
            verdict.retry_after_seconds, self._settings.initial_backoff_seconds
        )
        self._log.asked_to_wait(wait)
        return wait

    def _cut_smaller(self, samples: int) -> None:
        if samples < self._max_samples:
            self._max_samples = samples
            log.warning(
                "shipper: batches are cut at %d samples from now on, as one twice that size "
                "was too large (set shipper.max_samples_per_batch to keep it after a restart)",
                samples,
            )

    def _deliver(
        self, body: bytes, boot_id: str, seq: int, samples: int, timeout: float
    ) -> Verdict:
        try:
            response = self._client.post(
                self._endpoint, content=body, headers=batch_headers(self._token), timeout=timeout
            )
        except httpx.HTTPError as err:
            verdict = Verdict(ShipOutcome.RETRY, "network", f"collector unreachable: {err!r}")
        else:
            verdict = judge(response, boot_id, seq, samples, self._clock())
        if verdict.reason == "unauthorized":
            self._reload_token()
        self._log.answered(verdict, boot_id, seq, samples)
        return verdict

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
