"""The commands the stack needs beyond the pipeline: the ingest heartbeat and ``health``,
``serve`` for the reports, and ``create-topics`` sizing topics from the environment."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specmetrics.cli import main
from specmetrics.commands.serve import make_server
from tests.deploy.compose import ROOT
from tests.support.loadgen import write_load
from transport.kafka import KafkaAddress, KafkaSettings, admin


def test_ingest_writes_its_heartbeat_with_the_totals(log_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    write_load(log_dir, rows=2_000, seed=1)
    heartbeat = tmp_path / "run" / "ingest.heartbeat"
    assert main(["ingest", "--source", log_dir.as_uri(), "--out", str(data_dir), "--once", "--quiet",
                 "--heartbeat-file", str(heartbeat)]) == 0
    content = json.loads(heartbeat.read_text())
    assert content["pid"] == os.getpid() and content["time"] <= time.time()
    assert {"records", "rows", "files"} <= set(content)


def test_an_idle_ingester_keeps_its_heartbeat_fresh(log_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    rows = sum(t.rows for t in write_load(log_dir, rows=100, seed=1).values())
    heartbeat = tmp_path / "ingest.heartbeat"
    proc = subprocess.Popen([sys.executable, "-m", "specmetrics.cli", "ingest", "--source", log_dir.as_uri(),
                             "--out", str(data_dir), "--quiet", "--heartbeat-file", str(heartbeat)],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        beats: set[float] = set()
        deadline = time.monotonic() + 30
        while len(beats) < 3 and time.monotonic() < deadline:  # three distinct beats, with nothing to read
            if heartbeat.exists():
                beats.add(json.loads(heartbeat.read_text())["time"])
            time.sleep(0.2)
        assert len(beats) >= 3, proc.stderr
        assert main(["health", "--heartbeat-file", str(heartbeat), "--max-age-s", "5"]) == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.startswith(f"ingested {rows} request-steps"), out


def test_health_is_0_when_fresh_and_1_when_stale_or_missing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    heartbeat = tmp_path / "hb"
    assert main(["health", "--heartbeat-file", str(heartbeat)]) == 1
    assert f"unhealthy: no heartbeat file at {heartbeat}" in capsys.readouterr().out
    heartbeat.write_text(json.dumps({"time": time.time(), "pid": 1, "rows": 42}))
    assert main(["health", "--heartbeat-file", str(heartbeat), "--max-age-s", "30"]) == 0
    assert "healthy: last heartbeat" in (out := capsys.readouterr().out) and "rows=42" in out
    past = time.time() - 120
    os.utime(heartbeat, (past, past))
    assert main(["health", "--heartbeat-file", str(heartbeat), "--max-age-s", "60"]) == 1
    assert "unhealthy: last heartbeat 120" in capsys.readouterr().out


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


def test_topics_are_created_with_the_partitions_replication_and_retention_of_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[Any] = []

    class FakeAdmin:
        def __init__(self, **config: Any) -> None:
            pass

        def list_topics(self) -> list[str]:
            return []

        def create_topics(self, topics: list[Any]) -> None:
            created.extend(topics)

        def close(self) -> None:
            pass

    monkeypatch.setattr(admin, "KafkaAdminClient", FakeAdmin)
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_PARTITIONS", "12")
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_REPLICATION", "3")
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_RETENTION_MS", "86400000")
    assert admin.ensure_topic(KafkaAddress.parse("kafka://b:9092/steps"), KafkaSettings())
    [topic] = created
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("steps", 12, 3)
    assert topic.topic_configs == {"retention.ms": "86400000"}
    monkeypatch.delenv("SPECMETRICS_KAFKA_TOPIC_RETENTION_MS")
    admin.ensure_topic(KafkaAddress.parse("kafka://b:9092/steps"), KafkaSettings())
    assert created[1].topic_configs == {}  # the broker's default retention


def test_create_topics_makes_the_step_and_dead_letter_topics_once(
        kafka_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    topic = KafkaAddress.parse(kafka_url).topic
    assert main(["create-topics", kafka_url]) == 0
    assert capsys.readouterr().out == f"{topic}: created\n{topic}.dead-letter: created\n"
    assert main(["create-topics", kafka_url, "--dead-letter-topic", ""]) == 0
    assert capsys.readouterr().out == f"{topic}: exists (left as it is)\n"
