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
from collections.abc import Collection
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


def free_port(twin: int = 0, taken: Collection[int] = ()) -> int:
    """A free loopback port below the ephemeral range, not in ``taken``; with ``twin``, the port
    ``twin`` above it is free, below the range and not in ``taken`` as well (a server that listens on
    both)."""
    end = ephemeral_start() - twin
    for _ in range(500):
        port = random.randrange(LOWEST, end)
        candidates = {port, port + twin}
        if not candidates & set(taken) and all(_free(candidate) for candidate in candidates):
            return port
    raise RuntimeError(f"no free loopback port in {LOWEST}-{end - 1}")


def free_ports(count: int, twin: int = 0) -> list[int]:
    """``count`` ports as :func:`free_port` gives them, no two the same, nor one another's twin (weed's
    gRPC port of one server must not be another's port)."""
    ports: list[int] = []
    for _ in range(count):
        ports.append(free_port(twin, taken={held + shift for held in ports for shift in (0, twin)}))
    return ports


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
