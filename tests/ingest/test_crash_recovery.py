"""Exactly once under real process kills, and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from specmetrics.storage.layout import STATE_DIR
from tests.support.ingest import assert_rows_once, ingest_once
from tests.support.loadgen import write_load

ROOT = Path(__file__).resolve().parents[2]


def start_ingester(log_dir: Path, data_dir: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", log_dir.as_uri(), "--out", str(data_dir),
         *extra],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )



def committed(data_dir: Path) -> int:
    try:
        return int(json.loads((data_dir / STATE_DIR / "log.offsets.json").read_text())["0"])
    except FileNotFoundError:
        return 0


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(log_dir: Path, data_dir: Path) -> None:
    truth = write_load(log_dir, rows=300_000, seed=11, engines=2)
    expected = sum(t.rows for t in truth.values())
    end = expected // 64
    rng = random.Random(7)
    killed_at = []
    for _ in range(5):
        before = committed(data_dir)
        proc = start_ingester(log_dir, data_dir, "--once", "--flush-rows", "8000")
        while committed(data_dir) == before and proc.poll() is None:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.08))  # somewhere in the next flush: reading, writing or renaming
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_at.append(committed(data_dir))
    assert 0 < killed_at[0] and killed_at[-1] < end, killed_at  # every kill hit the middle of the stream
    assert killed_at == sorted(killed_at)
    ingest_once(log_dir, data_dir, flush_rows=8_000)
    assert committed(data_dir) == end
    assert_rows_once(data_dir, expected)


def test_following_picks_up_appends_and_sigterm_flushes_and_commits(log_dir: Path, data_dir: Path) -> None:
    write_load(log_dir, rows=2_000, seed=1, engine_prefix="first")
    proc = start_ingester(log_dir, data_dir)
    deadline = time.monotonic() + 60
    while committed(data_dir) < 32 and time.monotonic() < deadline:  # idle flush of the first batch
        time.sleep(0.05)
    assert committed(data_dir) == 32
    write_load(log_dir, rows=3_000, seed=2, engine_prefix="second")
    time.sleep(3.0)  # read, not yet flushed: the idle flush needs 5 s
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert committed(data_dir) == 32 + 47  # SIGTERM flushed and committed the second batch
    assert_rows_once(data_dir, 2_048 + 3_008)
    assert ingest_once(log_dir, data_dir).rows == 0
