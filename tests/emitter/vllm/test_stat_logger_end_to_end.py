"""Never blind, end to end on real vLLM 0.32.0: ``AsyncLLM`` (``vllm serve``'s engine, its engine core in a
process of its own) with the scheduler hook turned off. The plugin's stat logger, loaded by vLLM's
front end, records vLLM's own counters of every step; per story the view ``vllm_only_steps`` equals
what vLLM reported, vLLM's 0.00 % of the ``too_long`` story included, and no corrected number exists."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from specmetrics.queries import connect, run_query
from specmetrics.vllm_scenarios import COUNTERS
from tests.support.vllm import Run

STORIES = ["fits", "too_long", "crossing", "mixed", "grammar"]


@pytest.fixture(scope="module")
def blind(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Run:
    return Run(tmp_path_factory.mktemp("vllm-async-hook-off"), model_cache, "draft_model", "--frontend", "async",
               SPECMETRICS_STEP_HOOK="false")


@pytest.mark.parametrize("story", STORIES)
def test_each_story_shows_vllms_own_numbers_only(blind: Run, story: str) -> None:
    scenario = blind.scenarios[f"draft_model/{story}"]
    window = [datetime.fromtimestamp(scenario[end], UTC) for end in ("started", "finished")]
    con = connect(blind.data)
    try:
        [row] = run_query(con, "FROM vllm_only_steps_between(?, ?)", window).to_pylist()
        observed = run_query(con, "SELECT count(*) AS n FROM request_steps_between(?, ?)", window).to_pylist()
    finally:
        con.close()
    assert {name: row[name] for name in COUNTERS} == {name: scenario["vllm"][name] for name in COUNTERS}
    assert row["num_drafts"] > 0 and row["vllm_only"] == "step_hook_off" and row["vllm_version"] == "0.32.0"
    assert observed == [{"n": 0}]
    if story == "too_long":  # every draft vLLM counted was a placeholder: its 0.00 %, and nothing to correct it
        assert row["acceptance_rate"] == 0.0


def test_the_front_end_loaded_the_stat_logger_and_said_why(blind: Run) -> None:
    assert "specmetrics_vllm_counts -> specmetrics.emitter.vllm.stat_logger:VllmCountsLogger" in blind.vllm_log
    assert "recording vLLM's own counters only (step_hook_off): corrected metrics unavailable" in blind.vllm_log
