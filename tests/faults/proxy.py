"""A loopback HTTP proxy in front of the real collector that answers some batches itself:
429 with ``Retry-After``, 413, 503, as an overloaded collector or a proxy with a body
limit does.

Everything else is forwarded to the collector as sent, and every batch POST that reaches
the proxy is kept as an ``Exchange`` (wire.py), faults included, so a test can see when the
agent came back after a ``Retry-After`` and how it cut a batch refused as too large.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import msgspec

from tests.faults.wire import Exchange, decode_batch, exchange

_FORWARDED_HEADERS = ("content-type", "content-encoding", "authorization", "user-agent")


@dataclass
class Fault:
    """Answer ``status`` to the next ``times`` batch POSTs (413: only those carrying more
    than ``over_samples`` samples), after ``skip`` more batches have been forwarded."""

    status: int
    times: int
    skip: int = 0
    retry_after_seconds: int | None = None
    over_samples: int = 0


class FaultyProxy:
    """Listens on ``127.0.0.1:port``, forwards to ``upstream`` (the collector's base URL)."""

    def __init__(self, upstream: str, port: int, faults: Iterable[Fault]) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.exchanges: list[Exchange] = []
        self._faults = deque(faults)
        self._lock = threading.Lock()
        self._client = httpx.Client(base_url=upstream, timeout=30.0)
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FaultyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    @property
    def faults_left(self) -> int:
        with self._lock:
            return sum(f.times for f in self._faults)

    def _fault_for(self, samples: int) -> Fault | None:
        """The fault that answers this batch, if any (the plan is used up in order)."""
        with self._lock:
            while self._faults and self._faults[0].times <= 0:
                self._faults.popleft()
            if not self._faults:
                return None
            head = self._faults[0]
            if head.skip > 0:
                head.skip -= 1
                return None
            if samples <= head.over_samples:
                return None
            head.times -= 1
            return head

    def _keep(self, kept: Exchange) -> None:
        with self._lock:
            self.exchanges.append(kept)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                at = time.monotonic()
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                coding = self.headers.get("content-encoding")
                samples = len(decode_batch(body, coding).samples)
                fault = proxy._fault_for(samples)
                if fault is not None:
                    retry_after = fault.retry_after_seconds
                    header = None if retry_after is None else str(retry_after)
                    error = msgspec.json.encode(
                        {"error": f"fault injected by the test proxy: HTTP {fault.status}"}
                    )
                    proxy._keep(exchange(body, coding, fault.status, error, header, at))
                    self._answer(fault.status, error, "application/json", header)
                    return
                headers = {k: v for k in _FORWARDED_HEADERS if (v := self.headers.get(k))}
                try:
                    answer = proxy._client.post(self.path, content=body, headers=headers)
                except httpx.HTTPError:
                    proxy._keep(exchange(body, coding, None, None, None, at))
                    self._answer(502, b'{"error": "collector unreachable"}', "application/json")
                    return
                retry_after_header = answer.headers.get("retry-after")
                proxy._keep(
                    exchange(
                        body, coding, answer.status_code, answer.content, retry_after_header, at
                    )
                )
                kind = answer.headers.get("content-type", "application/json")
                self._answer(answer.status_code, answer.content, kind, retry_after_header)

            def _answer(
                self, status: int, content: bytes, kind: str, retry_after: str | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(content)))
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the exchanges are the record."""

        return Handler
