"""The tests' servers get loopback ports below the kernel's ephemeral range, where a probe cannot
connect to itself."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from devtools import ports
from devtools.ports import LOWEST, ephemeral_start, free_port, free_ports


def test_a_port_lies_below_the_ephemeral_range_and_is_free() -> None:
    for _ in range(50):
        port = free_port()
        assert LOWEST <= port < ephemeral_start()
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_twin_lies_below_the_range_too() -> None:
    for _ in range(50):
        port = free_port(twin=10_000)
        assert LOWEST <= port and port + 10_000 < ephemeral_start()


def test_the_range_is_read_from_the_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ephemeral_start() == int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    (tmp_path / "range").write_text("12000\t60999\n")
    monkeypatch.setattr(ports, "_RANGE", tmp_path / "range")
    assert {free_port() for _ in range(50)} <= set(range(LOWEST, 12_000))
    monkeypatch.setattr(ports, "_RANGE", tmp_path / "missing")
    assert ephemeral_start() == 32_768


def test_no_port_is_handed_out_when_none_is_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_free", lambda port: False)
    with pytest.raises(RuntimeError, match="no free loopback port"):
        free_port()


def test_ports_for_one_server_are_all_different_twins_included(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six ports and their twins 10,000 above: twelve different ports, even where the random picks would
    make one port another's twin."""
    picks = iter([20_000, 10_000, 10_000, 20_000, 12_000, 13_000, 14_000, 15_000, 16_000])
    monkeypatch.setattr(ports.random, "randrange", lambda low, high: next(picks))
    chosen = free_ports(6, twin=10_000)
    assert chosen == [20_000, 12_000, 13_000, 14_000, 15_000, 16_000]  # 10,000's twin is 20,000: passed over
    assert len({port + shift for port in chosen for shift in (0, 10_000)}) == 12
