"""The real ``gpufleet collector`` process at its HTTP edge: a 1 MiB request header is
refused before it is parsed (h11's bound, ``server.max_header_bytes``) and the collector
stays up; 405 answers carry ``Allow``; a bare token from GPUFLEET_SERVER__TOKENS still
does everything and is warned about once at start, without its value."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.collector_process import CollectorProcess
from tests.e2e.fleet_rig import free_port

TOKEN = "edge-bare-token-5c1e"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    tmp = tmp_path_factory.mktemp("edge")
    config = tmp / "collector.yaml"
    config.write_text("")
    process = CollectorProcess(config, free_port(), tmp / "l.db", TOKEN, tmp / "collector.log")
    process.start()
    try:
        yield process
    finally:
        process.stop_if_running()


def raw_request(url: str, header_bytes: int) -> bytes:
    """A GET /healthz with one header of ``header_bytes``; the whole answer, as sent, or
    b"reset" when the connection was reset before any answer came: a server that refuses
    a request it has not read to the end closes with unread data, and the kernel then
    resets the connection, which may discard the 400 it wrote."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nX-Padding: {'a' * header_bytes}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    answer = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(request)
            while chunk := sock.recv(65536):
                answer += chunk
        except (BrokenPipeError, ConnectionResetError):
            return answer or b"reset"
    return answer


def test_a_1_mib_request_header_is_refused_and_the_collector_stays_up(
    collector: CollectorProcess,
) -> None:
    answer = raw_request(collector.url, 1024 * 1024)
    assert answer == b"reset" or answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert raw_request(collector.url, 32 * 1024).startswith(b"HTTP/1.1 200 ")  # a big cookie
    assert collector.health()["ledger_ok"] is True
    assert "Invalid HTTP request received" in collector.output()


def test_405_answers_carry_allow(collector: CollectorProcess) -> None:
    batches = httpx.get(collector.url + "/v1/batches", headers=AUTH)
    assert (batches.status_code, batches.headers["allow"]) == (405, "POST")
    assert batches.json()["error"] == "Method Not Allowed"
    fleet = httpx.delete(collector.url + "/v1/fleet", headers=AUTH)
    assert fleet.status_code == 405
    assert set(fleet.headers["allow"].split(", ")) == {"GET", "HEAD"}


def test_a_bare_token_still_does_everything_and_is_warned_about_once(
    collector: CollectorProcess,
) -> None:
    assert httpx.get(collector.url + "/v1/fleet", headers=AUTH).status_code == 200
    dismiss = httpx.post(collector.url + "/v1/recommendations/none/dismiss", headers=AUTH)
    assert dismiss.status_code == 404  # past the gate: there is no such recommendation
    assert httpx.get(collector.url + "/metrics").status_code == 200  # open by default
    log = collector.output()
    assert log.count("token #1 has no scope: it may do everything") == 1
    assert TOKEN not in log
