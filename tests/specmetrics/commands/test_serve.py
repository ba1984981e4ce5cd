"""``specmetrics serve``: a read-only static server for the reports, bounded and stopped at once."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specmetrics.commands.serve import make_server
from tests.support.compose import ROOT


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    root = tmp_path / "reports"
    root.mkdir()
    server = make_server(root, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def request(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_serve_returns_the_files_of_its_folder(served: tuple[Path, int]) -> None:
    root, port = served
    (root / "latest.html").write_text("<h1>report</h1>")
    assert request(port, "/latest.html") == (200, b"<h1>report</h1>")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/")
    response = connection.getresponse()
    assert (response.status, response.getheader("Location"), response.read()) == (302, "latest.html", b"")
    connection.close()


def test_serve_lists_no_folder_and_serves_no_dotfile_and_refuses_bad_paths(served: tuple[Path, int]) -> None:
    root, port = served
    (root / "reports").mkdir()
    (root / "reports" / "report-1.md").write_text("# 1")
    (root / ".env").write_text("PASSWORD=x")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[remote] url = https://user:secret@example.com")
    (root / "env").symlink_to(root / ".env")
    for path in ("/", "/reports/", "/.env", "/%2eenv", "/.git/config", "/reports/../.git/config", "/env"):
        status, body = request(port, path)
        assert status == 404 and b"report-1" not in body and b"secret" not in body and b"PASSWORD" not in body, path
    for path in ("/%00", "/a%00b.md", "/%ff.md"):
        assert request(port, path)[0] == 400, path
    assert request(port, "/reports/report-1.md") == (200, b"# 1")


def idle_sockets(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that send nothing."""
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def drained(sockets: list[socket.socket], within_s: float) -> list[bytes | None]:
    """What the server sent on each socket before closing it; None for one it did not close
    within ``within_s`` (in all)."""
    deadline = time.monotonic() + within_s
    answers: list[bytes | None] = []
    for sock in sockets:
        received = b""
        try:
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                if not (chunk := sock.recv(1024)):
                    break
                received += chunk
        except TimeoutError:
            answers.append(None)
            continue
        except ConnectionResetError:
            pass
        answers.append(received)
    return answers


def test_idle_connections_time_out_and_are_bounded(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# a")
    server = make_server(tmp_path, "127.0.0.1", 0, max_connections=50, idle_timeout_s=1.0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    held = idle_sockets(port, 300)
    try:
        started = time.monotonic()
        status, _ = request(port, "/a.md")
        assert status in (200, 503) and time.monotonic() - started < 3  # answered at once, busy or not
        time.sleep(1.5)
        assert request(port, "/a.md") == (200, b"# a")  # the idle ones were closed
        answers = drained(held, 3.0)
        assert None not in answers
        assert sum(answer.startswith(b"HTTP/1.0 503 ") for answer in answers if answer) >= 200  # beyond the 50
        assert threading.active_count() < 60
    finally:
        for sock in held:
            sock.close()
        server.shutdown()
        server.server_close()


def test_trickling_clients_are_cut_at_the_head_deadline_and_fresh_requests_are_answered(tmp_path: Path) -> None:
    """80 clients each sending one byte of a request head every 0.3 s (well inside the idle timeout):
    a fresh GET is answered 200 meanwhile, a big file still goes out whole to a client that reads it,
    and every trickler is closed once its head deadline passes."""
    (tmp_path / "a.md").write_text("# a")
    (tmp_path / "big.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    server = make_server(tmp_path, "127.0.0.1", 0, idle_timeout_s=10.0, head_timeout_s=1.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    head = b"GET /a.md HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 200
    closed: list[float] = []
    stop = threading.Event()

    def trickle() -> None:
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            try:
                for byte in head:
                    if stop.is_set():
                        return
                    sock.sendall(bytes([byte]))
                    time.sleep(0.3)
            except OSError:  # reset: the server closed it
                closed.append(time.monotonic() - started)

    threads = [threading.Thread(target=trickle, daemon=True) for _ in range(80)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        assert request(port, "/a.md") == (200, b"# a") and time.monotonic() - started < 2
        status, body = request(port, "/big.bin")
        assert status == 200 and body == (tmp_path / "big.bin").read_bytes()
        for thread in threads:
            thread.join(timeout=10)
        assert len(closed) == 80 and max(closed) < 6  # cut at 1.5 s (+ the sends that notice it)
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def test_serve_command_closes_idle_connections_and_stops_at_once_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "specmetrics.cli", "serve", "--dir", str(tmp_path), "--port", "0",
                             "--idle-timeout-s", "1", "--max-connections", "20"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    held: list[socket.socket] = []
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(":", 1)[1].strip("/\n"))
        (tmp_path / "a.md").write_text("# a")
        held = idle_sockets(port, 200)
        answers = drained(held, 3.0)
        assert None not in answers and sum(bool(answer) for answer in answers) >= 150  # 503 beyond the 20
        held += idle_sockets(port, 200)
        assert request(port, "/a.md")[0] in (200, 503)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
    finally:
        for sock in held:
            sock.close()
        proc.kill()
        proc.wait()


def test_serve_never_leaves_its_folder_and_never_writes(served: tuple[Path, int], tmp_path: Path) -> None:
    root, port = served
    (tmp_path / "secret.txt").write_text("secret")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    for path in ("/../secret.txt", "/%2e%2e/secret.txt", "/link.txt"):
        status, body = request(port, path)
        assert status == 404 and b"secret" not in body, path
    assert request(port, "/latest.html", "PUT")[0] == 501
    assert request(port, "/latest.html", "DELETE")[0] == 501
    assert not (root / "latest.html").exists()


def test_serve_command_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "specmetrics.cli", "serve", "--dir", str(tmp_path), "--port", "0"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(f"serving {tmp_path} read-only at http://127.0.0.1:"), line
    port = int(line.rsplit(":", 1)[1].strip("/\n"))
    (tmp_path / "a.md").write_text("# a")
    assert request(port, "/a.md") == (200, b"# a")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
