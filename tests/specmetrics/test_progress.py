"""Progress: a line on stderr at most every interval, the total when known, and one at the end."""

from __future__ import annotations

import pytest

from specmetrics import progress
from specmetrics.progress import Progress


def test_lines_at_most_every_interval_and_one_at_the_end(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    line = Progress("ingest", unit="records", interval_s=1.0, total=4000)
    now[0] = 100.5
    line.update(1000)  # within the interval: nothing
    assert capsys.readouterr().err == ""
    now[0] = 101.0
    line.update(2000)
    assert capsys.readouterr().err == "ingest: 2,000/4,000 records (2,000/s, 1.0s)\n"
    now[0] = 102.0
    line.update(3000, total=5000)
    line.finish()
    assert capsys.readouterr().err.splitlines() == ["ingest: 3,000/5,000 records (1,500/s, 2.0s)",
                                                   "ingest: 3,000/5,000 records (1,500/s, 2.0s)"]


def test_a_slow_rate_keeps_a_decimal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A rollup of a large file every few seconds: not '0/s'."""
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    line = Progress("verify rollups", unit="files", total=10)
    now[0] = 106.0
    line.update(2)
    now[0] = 107.0
    line.update(9)
    assert capsys.readouterr().err.splitlines() == ["verify rollups: 2/10 files (0.3/s, 6.0s)",
                                                   "verify rollups: 9/10 files (1.3/s, 7.0s)"]
