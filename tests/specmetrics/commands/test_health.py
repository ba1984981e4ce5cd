"""The ingest heartbeat and ``specmetrics health``, the ingest container's healthcheck."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specmetrics.cli import main
from tests.support.compose import ROOT
from tests.support.loadgen import write_load


def test_ingest_writes_its_heartbeat_with_the_totals(log_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    write_load(log_dir, rows=2_000, seed=1)
    heartbeat = tmp_path / "run" / "ingest.heartbeat"
    assert main(["ingest", "--source", log_dir.as_uri(), "--out", str(data_dir), "--once", "--quiet",
                 "--heartbeat-file", str(heartbeat)]) == 0
    content = json.loads(heartbeat.read_text())
    assert content["pid"] == os.getpid() and content["time"] <= time.time()
    assert {"records", "rows", "files"} <= set(content) and content["stalled_s"] == 0.0


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


def test_a_fresh_heartbeat_of_a_stalled_ingester_is_unhealthy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    heartbeat = tmp_path / "hb"
    heartbeat.write_text(json.dumps({"time": time.time(), "pid": 1, "rows": 42, "stalled_s": 150.0}))
    assert main(["health", "--heartbeat-file", str(heartbeat), "--max-stalled-s", "200"]) == 0
    assert "stalled_s=150.0" in capsys.readouterr().out
    assert main(["health", "--heartbeat-file", str(heartbeat), "--max-stalled-s", "120"]) == 1
    assert capsys.readouterr().out.startswith("unhealthy: stalled for 150 s (limit 120 s): it has work it does not do")


def test_the_healthcheck_imports_no_reader_or_ingester(tmp_path: Path) -> None:
    # A container's healthcheck runs it every few seconds: the other commands' modules (DuckDB, pyarrow,
    # the ingester) took it 0.8 s of CPU a run.
    heartbeat = tmp_path / "ingest.heartbeat"
    heartbeat.write_text(json.dumps({"pid": 1, "time": time.time()}))
    probe = ("import sys; from specmetrics.cli import main; code = main(['health', '--heartbeat-file', sys.argv[1], "
             "'--max-age-s', '60']); print(code, sorted(m for m in ('duckdb', 'pyarrow', 'deltalake', "
             "'specmetrics.ingest', 'specmetrics.queries') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, str(heartbeat)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=True)
    assert done.stdout.splitlines()[-1] == "0 []", done.stdout + done.stderr
