"""The schedule loop of ``report`` and ``table maintain``: what counts as a failed run."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path

import pytest

from specmetrics import scheduled
from specmetrics.heartbeat import Heartbeat
from specmetrics.scheduled import run_on_schedule


@pytest.mark.parametrize(("codes", "exit_code", "last_beat"), [
    ([1, 0], 0, 2),  # a run that returned 1 failed, the second succeeded
    ([0, 2], 1, 1),  # the last one failed: exit 1, the heartbeat from the first
    ([0, 0], 0, 2),
])
def test_a_run_that_returns_other_than_0_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture, codes: list[int], exit_code: int,
                                                last_beat: int) -> None:
    monkeypatch.setattr(scheduled, "_sleep_until", lambda when: None)
    left = list(codes)
    beat = tmp_path / "beat"

    def job(when: datetime) -> int:
        return left.pop(0)

    with caplog.at_level(logging.ERROR):
        assert run_on_schedule("1h", 2, job, Heartbeat(beat, interval_s=0), logging.getLogger("t"), "job") == exit_code
    assert json.loads(beat.read_text())["runs"] == last_beat
    assert caplog.text.count("job run failed (the next one still runs): exit code") == sum(1 for c in codes if c)
