"""The plugin on real vLLM: every story of every method through the local log, ingest and the views.

Methods: a same-weights ``draft_model``, and the exact EAGLE, EAGLE-3 and MTP drafters of the
cycle targets (every real draft accepted); ``ngram``. Stories: a drafter that fits, prompts past
its max length, a batch that crosses it, one long request among short ones, structured output.
In-process (via the demo) and multiprocess engine cores:
- the vLLM-compatible numbers equal what vLLM itself reported for that story, exactly;
- the corrected numbers equal the truth.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from specmetrics.queries import run_query
from specmetrics.vllm_scenarios import ENGINES
from specmetrics.windows import window_metrics
from tests.support.vllm import ROOT, DemoRun, Run


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> DemoRun:
    """The in-process run is the demo's real-vLLM path (its default: VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    return DemoRun(tmp_path_factory.mktemp("vllm-demo"), model_cache)


@pytest.fixture(scope="module")
def multiprocess(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Run:
    return Run(tmp_path_factory.mktemp("vllm-mp"), model_cache, ",".join(ENGINES),
               "--per-request-spec-decode-metrics", "detailed", VLLM_ENABLE_V1_MULTIPROCESSING="1")


@pytest.fixture(params=["demo", "multiprocess"], ids=["inprocess-via-demo", "multiprocess"])
def run(request: pytest.FixtureRequest) -> Run:
    found: Run = request.getfixturevalue(request.param)
    return found


def scenario_numbers(run: Run, name: str) -> dict[str, Any]:
    """The views' numbers restricted to one scenario's time window."""
    scenario = run.scenarios[name]
    return window_metrics(run.views, scenario["started"], scenario["finished"], positions=3)


DRAFTING = ["draft_model", "eagle", "eagle3", "mtp"]
EXACT = ["eagle", "eagle3", "mtp"]  # the cycle targets' drafters: every real draft is accepted
STORIES = ["fits", "too_long", "crossing", "mixed", "grammar"]
SCENARIOS = [f"{engine}/{story}" for engine in DRAFTING for story in STORIES] + ["ngram/ngram"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_vllm_compatible_numbers_equal_vllms_own_counters(run: Run, name: str) -> None:
    got, vllm = scenario_numbers(run, name), run.scenarios[name]["vllm"]
    assert (got["vllm_num_drafts"], got["vllm_num_draft_tokens"], got["vllm_num_accepted_tokens"]) == (
        vllm["num_drafts"], vllm["num_draft_tokens"], vllm["num_accepted_tokens"])
    assert got["vllm_per_pos"] == vllm["num_accepted_tokens_per_pos"]


@pytest.mark.parametrize("engine", DRAFTING)
def test_a_drafter_that_fits_is_fully_accepted(run: Run, engine: str) -> None:
    got = scenario_numbers(run, f"{engine}/fits")
    assert got["kinds"] == {"drafted": got["request_steps"]} and got["request_steps"] > 0
    assert got["num_accepted_tokens"] == got["num_draft_tokens"] == 3 * got["num_drafts"]
    assert got["acceptance_rate"] == 1.0


@pytest.mark.parametrize("engine", DRAFTING)
def test_prompts_past_the_drafter_limit_are_skipped_not_drafted(run: Run, engine: str) -> None:
    got, vllm = scenario_numbers(run, f"{engine}/too_long"), run.scenarios[f"{engine}/too_long"]["vllm"]
    assert vllm["num_accepted_tokens"] == 0 < vllm["num_drafts"]  # vLLM: 0.00 % acceptance, length 1.00
    assert got["kinds"] == {"skipped_for_length": vllm["num_drafts"]}
    assert got["num_drafts"] == 0


@pytest.mark.parametrize("engine", DRAFTING)
def test_a_batch_crossing_the_limit_skips_everyone_and_real_drafts_are_all_accepted(run: Run, engine: str) -> None:
    got, vllm = scenario_numbers(run, f"{engine}/crossing"), run.scenarios[f"{engine}/crossing"]["vllm"]
    assert got["kinds"]["skipped_for_length"] > 0 and got["kinds"]["drafted"] > 0
    assert got["num_accepted_tokens"] == got["num_draft_tokens"] > 0
    assert vllm["num_accepted_tokens"] < vllm["num_draft_tokens"]
    assert vllm["num_drafts"] - got["num_drafts"] == got["kinds"]["skipped_for_length"]


@pytest.mark.parametrize("engine", DRAFTING)
def test_one_long_request_turns_drafting_off_for_the_short_ones(run: Run, engine: str) -> None:
    """The long request generates 8 tokens, so it owns at most 8 request-steps: every skip beyond
    those is a short request that fit the drafter. Once it is done the short ones draft again."""
    got, vllm = scenario_numbers(run, f"{engine}/mixed"), run.scenarios[f"{engine}/mixed"]["vllm"]
    assert got["kinds"]["skipped_for_length"] > 8 and got["kinds"]["drafted"] > 0
    assert set(got["kinds"]) == {"skipped_for_length", "drafted"}
    assert vllm["num_drafts"] - got["num_drafts"] == got["kinds"]["skipped_for_length"]
    if engine in EXACT:
        assert got["num_accepted_tokens"] == got["num_draft_tokens"] == 3 * got["num_drafts"]


def scenario_rows(run: Run, name: str) -> list[dict[str, Any]]:
    """The request-steps of one scenario: request, kind and seq_len, in step order."""
    scenario = run.scenarios[name]
    return run_query(run.views, "SELECT request_id, kind, seq_len FROM request_steps_between(make_timestamp(CAST("
                                "? * 1e6 AS BIGINT)), make_timestamp(CAST(? * 1e6 AS BIGINT) + 1)) ORDER BY step_index",
                     [scenario["started"], scenario["finished"]]).to_pylist()


@pytest.mark.parametrize("engine", EXACT)
def test_each_outcome_carries_its_request_s_own_length_where_its_drafts_were_decided(run: Run, engine: str) -> None:
    """Schema 1.5. Short prompts of 20 tokens, every draft accepted: a request's first drafts were
    decided after its prefill (20 tokens), each later step adds the 3 drafts and the bonus token."""
    lengths: dict[str, list[int]] = {}
    for row in scenario_rows(run, f"{engine}/fits"):
        lengths.setdefault(row["request_id"], []).append(row["seq_len"])
    assert len(lengths) == 4
    assert all(seen == [20 + 4 * i for i in range(len(seen))] and len(seen) >= 5 for seen in lengths.values())


@pytest.mark.parametrize("engine", DRAFTING)
def test_the_short_requests_skipped_beside_a_long_one_are_told_apart_by_their_own_length(run: Run, engine: str) -> None:
    """The drafter (max 96 tokens, K = 3) fits a request of seq_len 93 or less. Beside the long
    request (121 tokens) every skip but the long one's own is a short request that fit."""
    rows = scenario_rows(run, f"{engine}/mixed")
    skipped = [row for row in rows if row["kind"] == "skipped_for_length"]
    fitting = [row for row in skipped if row["seq_len"] + 3 <= 96]
    long_ids = {row["request_id"] for row in skipped if row["seq_len"] + 3 > 96}
    assert all(row["seq_len"] is not None for row in rows)
    assert len(long_ids) == 1 and len(skipped) - len(fitting) <= 8
    assert len(fitting) > 8 and all(row["seq_len"] < 50 for row in fitting)
    assert all(row["seq_len"] >= 121 for row in skipped if row["request_id"] in long_ids)


@pytest.mark.parametrize("engine", DRAFTING)
def test_grammar_invalid_drafts_are_counted_apart(run: Run, engine: str) -> None:
    got = scenario_numbers(run, f"{engine}/grammar")
    invalid = got["kinds"].get("grammar_invalid", 0) + got["kinds"].get("k_zero:grammar_truncated", 0)
    assert invalid > 0 and got["k_invalid"] > 0
    assert set(got["kinds"]) <= {"drafted", "grammar_invalid", "k_zero:grammar_truncated"}
    assert got["num_accepted_tokens"] == got["num_draft_tokens"]  # the valid drafts are the target's own


def test_ngram_without_a_match_is_k_zero_no_proposal(run: Run) -> None:
    """The scenario leaves no room for other reasons (short prompts, no token budget or length limit
    reached): every K = 0 is a proposer that found no match. In-process, vLLM hands the plugin its
    live list of request ids, which the later steps reorder (read late, it gave unknown/schedule)."""
    got = scenario_numbers(run, "ngram/ngram")
    assert got["kinds"]["k_zero:no_proposal"] > 0
    assert [kind for kind in got["kinds"] if kind.startswith("k_zero")] == ["k_zero:no_proposal"]
    assert got["vllm_num_drafts"] == got["num_drafts"] == got["kinds"].get("drafted", 0)


def test_whole_run_views_equal_vllms_totals(run: Run) -> None:
    rows = {r["method"]: r for r in run_query(run.views, "SELECT * FROM acceptance_vllm").to_pylist()}
    assert set(rows) == set(ENGINES)
    for method in ENGINES:
        names = [name for name in SCENARIOS if name.startswith(f"{method}/")]
        for counter in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            assert rows[method][counter] == sum(run.scenarios[n]["vllm"][counter] for n in names)
        assert rows[method]["num_spec_tokens"] == 3
        assert rows[method]["engine_id"].endswith("/dp0")


def test_every_step_carries_vllms_own_counters_and_the_events_equal_them(run: Run) -> None:
    """Schema 1.6: the audit, step by step, on every method and story run here (with vLLM's stats on)."""
    audit = run_query(run.views, "SELECT method, steps_compared, steps_differing, steps_without_counts, "
                                 "(SELECT count(DISTINCT event_id) FROM request_steps s WHERE s.method = a.method) "
                                 "AS steps FROM vllm_audit a ORDER BY method").to_pylist()
    [drafted] = run_query(run.views, "SELECT count(*) AS n FROM vllm_audit_steps WHERE vllm_num_drafts > 0").to_pylist()
    assert [row["method"] for row in audit] == sorted(ENGINES)
    for row in audit:
        assert row["steps_compared"] == row["steps"] > 0 and row["steps_differing"] == 0, row
        assert row["steps_without_counts"] == 0, row
    assert drafted["n"] > 100  # vLLM counted drafts at these steps, and they agree


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_requests_own_vllm_numbers_stand_beside_the_events_and_the_truth(run: Run, name: str) -> None:
    """vLLM's per-request metrics (--per-request-spec-decode-metrics: summary in the demo's run, detailed
    in the multiprocess one), as its API returned them per request, are what the view shows as vLLM's,
    equal to the events' count as vLLM counts; the corrected numbers beside them say why they differ."""
    scenario = run.scenarios[name]
    rows = run_query(run.views, "SELECT vllm_reported_drafts, vllm_reported_draft_tokens, "
                                "vllm_reported_accepted_tokens, len(vllm_reported_accepted_per_step) AS per_step, "
                                "differs, num_drafts, num_draft_tokens, acceptance_rate, why "
                                "FROM request_reconciliation_between(make_timestamp(CAST(? * 1e6 AS BIGINT)), "
                                "make_timestamp(CAST(? * 1e6 AS BIGINT) + 1)) WHERE method = ?",
                     [scenario["started"], scenario["finished"], name.split("/", maxsplit=1)[0]]).to_pylist()
    api = sorted((m["num_spec_steps"], m["num_draft_tokens"], m["num_accepted_draft_tokens"])
                 for m in scenario["per_request"] if m is not None)
    assert sorted((r["vllm_reported_drafts"], r["vllm_reported_draft_tokens"], r["vllm_reported_accepted_tokens"])
                  for r in rows if r["vllm_reported_drafts"] is not None) == api
    assert len(api) == len(scenario["per_request"]) and all(r["differs"] is False for r in rows)
    detailed = not isinstance(run, DemoRun)  # per-step arrays only at the detailed level
    assert all((r["per_step"] > 0) == (detailed and r["vllm_reported_drafts"] > 0) for r in rows
               if r["vllm_reported_drafts"] is not None)
    if name.endswith("/too_long"):  # vLLM: each request drafted and accepted nothing; the truth: it never drafted
        assert {(r["vllm_reported_drafts"] > 0, r["vllm_reported_accepted_tokens"], r["num_drafts"], r["why"])
                for r in rows} == {(True, 0, 0, "skipped for length")}


def test_every_event_says_the_context_served_and_that_skips_could_be_seen(run: Run) -> None:
    """vLLM 0.32.0 on this CPU runs Model Runner V1: the context is the configured 512, never capped,
    and the worker's decision reaches the scheduler for every request verified, in one process and
    across processes (schema 1.3)."""
    rows = run_query(run.views, "SELECT DISTINCT method, max_model_len, context_cap_from, skip_check FROM "
                                "request_steps ORDER BY ALL").to_pylist()
    assert [tuple(r.values()) for r in rows] == [(method, 512, None, "observed") for method in sorted(ENGINES)]


def test_the_demo_prints_vllm_next_to_the_truth(demo: DemoRun) -> None:
    # readable in a terminal of 120 columns, run in the default workdir
    assert max(map(len, demo.output.replace(str(demo.root), "specmetrics-demo").splitlines())) <= 120
    side_by_side, _, rest = demo.output.partition("Why they differ")
    shares, _, collateral = rest.partition("Skips for length, by each request's own length")
    lines = {"/".join(cells[:2]): cells for cells in (line.split() for line in side_by_side.splitlines())
             if "/".join(cells[:2]) in SCENARIOS}
    assert list(lines) == SCENARIOS
    assert all(cells[8] == "yes" for cells in lines.values())  # events reproduce vLLM's counters
    skip_shares = {"/".join(cells[:2]): cells[2] for cells in (line.split() for line in shares.splitlines())
                   if "/".join(cells[:2]) in SCENARIOS}
    assert all(skip_shares[f"{engine}/too_long"] == "1.0000" for engine in DRAFTING)
    for engine in DRAFTING:
        assert lines[f"{engine}/too_long"][3:8] == ["0.0000", "1.0000", "0", "NULL", "NULL"]  # vLLM 0.00 %, no drafts
        assert lines[f"{engine}/fits"][6:8] == ["1.0000", "4.0000"]
    # Who paid for the long request: the short ones beside it, which fit the drafter alone.
    skips = {"/".join(cells[:2]): cells[2:] for cells in (line.split() for line in collateral.splitlines())
             if "/".join(cells[:2]) in SCENARIOS}
    for engine in DRAFTING:
        assert skips[f"{engine}/too_long"][:2] == [skips[f"{engine}/too_long"][0], "0"]
        mixed_skips, mixed_collateral = map(int, skips[f"{engine}/mixed"][:2])
        assert mixed_collateral > 8 and mixed_skips - mixed_collateral <= 8
    assert "Running the scenarios on real vLLM" in demo.output


def test_the_support_table_says_verified_end_to_end_for_exactly_the_methods_run_here() -> None:
    """docs/plugin.md's rows of this release verified end to end name the methods these tests run, no
    more and no fewer: the structured-output row the drafting ones."""
    text = (ROOT / "docs" / "plugin.md").read_text()
    table = text[text.index("## Supported versions"):text.index("## Known gaps")]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines() if line.startswith("| 0.32.0")]
    verified = [cells for cells in rows if cells[-1].startswith("verified end to end")]
    methods = [set(re.findall(r"`(\w+)`", cells[3])) for cells in verified]
    assert methods == [set(ENGINES), set(DRAFTING)], verified
    assert all("test_plugin_end_to_end.py" in cells[-1] for cells in verified)
    assert "structured output" in verified[1][3]
