"""Free loopback ports for tests that start servers (the demo needs a block of them)."""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_port_block(size: int) -> int:
    """A first port P with P..P+size-1 all free on loopback right now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = int(probe.getsockname()[1])
        if first + size > 65535:
            continue
        with ExitStack() as held:
            try:
                for port in range(first, first + size):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return first
    raise AssertionError("no block of free ports")
