"""Never blind: where the scheduler hook is off or cannot install, the plugin's stat logger, loaded by
vLLM's own ``vllm.stat_logger_plugins`` loader, records vLLM's own counters of every step, marked as
steps the plugin did not observe; the views show vLLM's history and no corrected number.

Each case runs vLLM's real scheduler and ``StatLoggerManager`` in a process of its own
(tests/support/stat_logger_run.py); on every release tested (tests/emitter/vllm/test_releases.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specmetrics.queries import connect, run_query
from tests.support.ingest import ingest_once
from tests.support.schedulers import COUNTERS
from tests.support.vllm import ROOT


@pytest.mark.parametrize(("env", "args", "reason"), [
    ({"SPECMETRICS_STEP_HOOK": "false"}, [], "step_hook_off"),
    ({}, ["--scheduler-changed"], "step_hook_not_installed"),
], ids=["hook-off", "hook-not-installed"])
def test_the_stat_logger_records_vllms_own_counters_where_the_hook_sees_nothing(
        model_cache: Path, tmp_path: Path, env: dict[str, str], args: list[str], reason: str) -> None:
    log, out = tmp_path / "log", tmp_path / "run.json"
    command = [sys.executable, "-m", "tests.support.stat_logger_run", "--model", str(model_cache / "tiny-llama-target"),
               "--out", str(out), *args]
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))  # a release's vllm stays first
    proc = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": path, "SPECMETRICS_SINK": log.as_uri(),
                                                  **env}, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = json.loads(out.read_text())
    assert run["loggers"] == ["specmetrics.emitter.vllm.stat_logger.VllmCountsLogger"]
    assert run["vllm_only"] == reason and run["hook_wrapped"] is False
    assert f"recording vLLM's own counters only ({reason})" in proc.stderr
    assert run["steps_with_stats"] >= 8 and run["counters"]["num_accepted_tokens"] > 0
    ingest_once(log, tmp_path / "data")
    con = connect(tmp_path / "data")
    try:
        [row] = run_query(con, "FROM vllm_only_steps").to_pylist()
        # vLLM's own totals, step for step, marked with why nothing else is known
        assert {name: row[name] for name in COUNTERS} == run["counters"]
        assert row["steps"] == run["steps_with_stats"] and row["vllm_only"] == reason
        assert row["acceptance_rate"] == pytest.approx(
            run["counters"]["num_accepted_tokens"] / run["counters"]["num_draft_tokens"])
        # no corrected number, no vLLM-compatible one rebuilt from outcomes: none was seen
        assert run_query(con, "SELECT count(*) AS n FROM request_steps").to_pylist() == [{"n": 0}]
        assert run_query(con, "FROM acceptance").to_pylist() == []
    finally:
        con.close()
