"""A stand-in collector for the agent benchmark: acknowledges every batch, counts samples.

Runs in its own process (``python -m bench.batch_sink PORT``) so its CPU is not charged
to the agent. ``POST /v1/batches`` answers a BatchAck for the batch's (node, boot id, seq),
as the collector does; ``GET /count`` returns ``{"batches": n, "samples": m}`` so far.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec

from agent.model import BatchAck
from bench.harness import http_get


def sink_samples(sink_url: str) -> int:
    return int(json.loads(http_get(sink_url + "/count"))["samples"])


class _BatchHead(msgspec.Struct):
    """What the sink reads of a batch: its identity and how many samples it holds."""

    node: str
    agent_boot_id: str
    seq: int
    samples: list[msgspec.Raw]


def serve_sink(port: int) -> None:
    """Accept POST /v1/batches like a collector (ack each batch); GET /count tells totals."""
    totals = {"batches": 0, "samples": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            head = msgspec.json.decode(body, type=_BatchHead)
            with lock:
                totals["batches"] += 1
                totals["samples"] += len(head.samples)
            ack = BatchAck(
                status="accepted",
                node=head.node,
                agent_boot_id=head.agent_boot_id,
                seq=head.seq,
                samples_accepted=len(head.samples),
            )
            self._reply(msgspec.json.encode(ack))

        def do_GET(self) -> None:
            with lock:
                self._reply(json.dumps(totals).encode())

        def _reply(self, payload: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    serve_sink(int(sys.argv[1]))
