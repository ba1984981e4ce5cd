"""The plugin on real vLLM: every scenario through the local log, ingest and the views.

For each scenario (a drafter that fits, prompts past its max length, a batch that crosses it,
structured output, ngram), in-process and multiprocess engine cores:
- the vLLM-compatible numbers equal what vLLM itself reported for that scenario, exactly;
- the corrected numbers equal the truth (same-weights drafter: every real draft accepted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queries import connect, run_query
from specmetrics.windows import window_metrics
from tests.support.vllm import DemoRun, Run


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> DemoRun:
    """The in-process run is the demo's real-vLLM path (its default: VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    return DemoRun(tmp_path_factory.mktemp("vllm-demo"), model_cache)


@pytest.fixture(scope="module")
def multiprocess(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Run:
    return Run(tmp_path_factory.mktemp("vllm-mp"), model_cache, "draft_model,ngram",
               VLLM_ENABLE_V1_MULTIPROCESSING="1")


@pytest.fixture(params=["demo", "multiprocess"], ids=["inprocess-via-demo", "multiprocess"])
def run(request: pytest.FixtureRequest) -> Run:
    found: Run = request.getfixturevalue(request.param)
    return found


def scenario_numbers(run: Run, name: str) -> dict[str, Any]:
    """The views' numbers restricted to one scenario's time window."""
    scenario = run.scenarios[name]
    con = connect(run.data)
    try:
        return window_metrics(con, scenario["started"], scenario["finished"], positions=3)
    finally:
        con.close()


SCENARIOS = ["fits", "too_long", "crossing", "grammar", "ngram"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_vllm_compatible_numbers_equal_vllms_own_counters(run: Run, name: str) -> None:
    got, vllm = scenario_numbers(run, name), run.scenarios[name]["vllm"]
    assert (got["vllm_num_drafts"], got["vllm_num_draft_tokens"], got["vllm_num_accepted_tokens"]) == (
        vllm["num_drafts"], vllm["num_draft_tokens"], vllm["num_accepted_tokens"])
    assert got["vllm_per_pos"] == vllm["num_accepted_tokens_per_pos"]


def test_a_drafter_that_fits_is_fully_accepted(run: Run) -> None:
    got = scenario_numbers(run, "fits")
    assert got["kinds"] == {"drafted": got["request_steps"]} and got["request_steps"] > 0
    assert got["num_accepted_tokens"] == got["num_draft_tokens"] == 3 * got["num_drafts"]


def test_prompts_past_the_drafter_limit_are_skipped_not_drafted(run: Run) -> None:
    got, vllm = scenario_numbers(run, "too_long"), run.scenarios["too_long"]["vllm"]
    assert vllm["num_accepted_tokens"] == 0 < vllm["num_drafts"]  # vLLM: 0.00 % acceptance
    assert got["kinds"] == {"skipped_for_length": vllm["num_drafts"]}
    assert got["num_drafts"] == 0


def test_a_batch_crossing_the_limit_skips_everyone_and_real_drafts_are_all_accepted(run: Run) -> None:
    got, vllm = scenario_numbers(run, "crossing"), run.scenarios["crossing"]["vllm"]
    assert got["kinds"]["skipped_for_length"] > 0 and got["kinds"]["drafted"] > 0
    assert got["num_accepted_tokens"] == got["num_draft_tokens"] > 0
    assert vllm["num_accepted_tokens"] < vllm["num_draft_tokens"]
    assert vllm["num_drafts"] - got["num_drafts"] == got["kinds"]["skipped_for_length"]


def test_grammar_invalid_drafts_are_counted_apart(run: Run) -> None:
    got = scenario_numbers(run, "grammar")
    invalid = got["kinds"].get("grammar_invalid", 0) + got["kinds"].get("k_zero:grammar_truncated", 0)
    assert invalid > 0 and got["k_invalid"] > 0
    assert set(got["kinds"]) <= {"drafted", "grammar_invalid", "k_zero:grammar_truncated"}
    assert got["num_accepted_tokens"] == got["num_draft_tokens"]  # the valid drafts are the target's own


def test_ngram_without_a_match_is_k_zero_no_proposal(run: Run) -> None:
    """The scenario leaves no room for other reasons (short prompts, no token budget or length limit
    reached): every K = 0 is a proposer that found no match. In-process, vLLM hands the plugin its
    live list of request ids, which the later steps reorder (read late, it gave unknown/schedule)."""
    got = scenario_numbers(run, "ngram")
    assert got["kinds"]["k_zero:no_proposal"] > 0
    assert [kind for kind in got["kinds"] if kind.startswith("k_zero")] == ["k_zero:no_proposal"]
    assert got["vllm_num_drafts"] == got["num_drafts"] == got["kinds"].get("drafted", 0)


def test_whole_run_views_equal_vllms_totals(run: Run) -> None:
    con = connect(run.data)
    rows = {r["method"]: r for r in run_query(con, "SELECT * FROM acceptance_vllm").to_pylist()}
    con.close()
    for method, names in (("draft_model", SCENARIOS[:4]), ("ngram", ["ngram"])):
        for counter in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            assert rows[method][counter] == sum(run.scenarios[n]["vllm"][counter] for n in names)
    assert rows["draft_model"]["num_spec_tokens"] == 3
    assert rows["draft_model"]["engine_id"].endswith("/dp0")


def test_every_event_says_the_context_served_and_that_skips_could_be_seen(run: Run) -> None:
    """vLLM 0.32.0 on this CPU runs Model Runner V1: the context is the configured 512, never capped,
    and the worker's decision reaches the scheduler for every request verified, in one process and
    across processes (schema 1.3)."""
    con = connect(run.data)
    try:
        rows = run_query(con, "SELECT DISTINCT method, max_model_len, context_cap_from, skip_check FROM request_steps "
                              "ORDER BY ALL").to_pylist()
    finally:
        con.close()
    assert [tuple(r.values()) for r in rows] == [("draft_model", 512, None, "observed"),
                                                 ("ngram", 512, None, "observed")]


def test_the_demo_prints_vllm_next_to_the_truth(demo: DemoRun) -> None:
    lines = {line.split()[0]: line.split() for line in demo.output.splitlines() if line.split()[:1] and
             line.split()[0] in SCENARIOS}
    assert list(lines) == SCENARIOS
    assert all(cells[10] == "yes" for cells in lines.values())  # events reproduce vLLM's counters
    assert lines["too_long"][2:7] == ["0.0000", "1.0000", "0", "NULL", "NULL"]  # vLLM 0.00 %, truth: no drafts
    assert lines["fits"][5:7] == ["1.0000", "4.0000"]
    assert "Running the scenarios on real vLLM" in demo.output
