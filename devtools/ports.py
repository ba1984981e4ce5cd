"""Loopback ports for the servers the tests start, below the kernel's ephemeral range.

A connection to a port of the ephemeral range that nothing listens on yet can be given that very
port as its own source, and then connects to itself (TCP's simultaneous open): a readiness probe
finds a server that is not there, or reads its own request back as the answer. A port below the
range is never a connection's source, so a probe of it fails until the server listens. A port
from ``bind(("127.0.0.1", 0))`` lies inside the range.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: The least port handed out (below it lie services' well-known ports).
LOWEST = 10_000
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default where it cannot be read)."""
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port(twin: int = 0) -> int:
    """A free loopback port below the ephemeral range; with ``twin``, the port ``twin`` above it is
    free and below the range as well (a server that listens on both)."""
    end = ephemeral_start() - twin
    for _ in range(500):
        port = random.randrange(LOWEST, end)
        if all(_free(candidate) for candidate in {port, port + twin}):
            return port
    raise RuntimeError(f"no free loopback port in {LOWEST}-{end - 1}")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
