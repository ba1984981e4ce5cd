"""``specmetrics sql`` without a query: the interactive session, piped and in a real terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specmetrics.cli import main
from specmetrics.commands.ingest import ingest_source
from tests.support.loadgen import write_load

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shell")
    write_load(root / "log", rows=5000, seed=2)
    ingest_source((root / "log").as_uri(), root / "data", once=True, show_progress=False)
    return root / "data"


def test_piped_statements_span_lines_and_errors_do_not_end_the_session(
        data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(
        ".views\n"
        "SELECT count(*) AS n\n  FROM request_steps;\n"
        "DROP VIEW acceptance;\n"
        ".format xml\n"
        ".format csv\n"
        "SELECT num_drafts FROM acceptance;\n"
        "SELECT 'no semicolon at the end'"))
    assert main(["sql", "--data", str(data)]) == 0
    out, err = capsys.readouterr()
    assert "specmetrics>" not in out  # no prompts when the input is not a terminal
    assert "acceptance_timeline(bucket, t0, t1)" in out and "Corrected vs vLLM-reported acceptance" in out
    assert "\n----\n5056\n(1 row)" in out  # the multi-line statement, as a table
    assert "error: DROP statements are not allowed" in err
    assert "unknown format 'xml'" in err
    assert re.search(r"^num_drafts\n\d+\n", out, re.M)  # csv after .format csv: no rule under the header
    assert "no semicolon at the end" in out  # the last statement runs at end of input


def test_a_terminal_session_keeps_its_history(data: Path, tmp_path: Path) -> None:
    history = tmp_path / "history"
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "specmetrics.cli", "sql", "--data", str(data),
                             "--history", str(history)], stdin=follower, stdout=follower, stderr=follower,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "dumb"})
    os.close(follower)
    seen = b""

    def until(text: bytes, timeout: float = 60) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while text not in seen and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.5)[0]:
                try:
                    seen += os.read(leader, 4096)
                except OSError:
                    break
        assert text in seen, seen[-500:]

    until(b"specmetrics> ")
    os.write(leader, b"SELECT 6 * 7\r")
    until(b"...> ")
    os.write(leader, b"  AS answer;\r")
    until(b"42")
    os.write(leader, b".quit\r")
    assert proc.wait(timeout=30) == 0
    os.close(leader)
    assert history.read_text().splitlines()[-3:] == ["SELECT 6 * 7", "  AS answer;", ".quit"]
