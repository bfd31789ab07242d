"""Ports a command is about to listen on, checked before anything starts.

A taken port otherwise surfaces as a 36-line traceback from deep inside uvicorn or
prometheus_client that names no port; the check names the port, what it was for and what
to do, before the command has built anything it would have to tear down.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping


class PortTaken(Exception):
    """A port the command needs is in use; the message names it and what to do."""


def check_free(host: str, ports: Mapping[int, str], hint: str) -> None:
    """Raise PortTaken for the first of ``ports`` (port -> what it serves) that ``host``
    cannot bind; ``hint`` says how to choose others."""
    for port, what in ports.items():
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as err:
                why = "already in use" if err.errno == errno.EADDRINUSE else err.strerror
                raise PortTaken(f"port {port} on {host} ({what}) is {why}; {hint}") from err
