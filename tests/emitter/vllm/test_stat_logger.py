"""Never blind: where the scheduler hook is off or cannot install, the plugin's stat logger, loaded by
vLLM's own ``vllm.stat_logger_plugins`` loader, records vLLM's own counters of every step, marked as
steps the plugin did not observe; the views show vLLM's history and no corrected number.

Both cases run vLLM's real scheduler and ``StatLoggerManager`` in one process of their own
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
from tests.support.stat_logger_run import CASES
from tests.support.vllm import ROOT


@pytest.fixture(scope="module")
def runs(model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("stat-logger")
    command = [sys.executable, "-m", "tests.support.stat_logger_run", "--model", str(model_cache / "tiny-llama-target"),
               "--out", str(out)]
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))  # a release's vllm stays first
    env = {name: value for name, value in os.environ.items() if not name.startswith("SPECMETRICS_")}
    proc = subprocess.run(command, cwd=ROOT, env={**env, "PYTHONPATH": path}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out, proc.stderr


@pytest.mark.parametrize("reason", CASES)
def test_the_stat_logger_records_vllms_own_counters_where_the_hook_sees_nothing(
        runs: tuple[Path, str], tmp_path: Path, reason: str) -> None:
    out, log = runs
    run = json.loads((out / f"{reason}.json").read_text())
    assert run["loggers"] == ["specmetrics.emitter.vllm.stat_logger.VllmCountsLogger"]
    assert run["vllm_only"] == reason and run["hook_wrapped"] is False
    assert f"recording vLLM's own counters only ({reason})" in log
    assert run["steps_with_stats"] >= 8 and run["counters"]["num_accepted_tokens"] > 0
    ingest_once(out / reason / "log", tmp_path / "data")
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
