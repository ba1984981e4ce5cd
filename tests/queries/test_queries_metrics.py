"""Every public view against numbers computed by hand on a small tree."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pytest

from specmetrics.queries import PUBLIC_VIEWS, run_query

A, B, C = "a/dp0", "b/dp1", "c/dp0"
DAY1, DAY2 = datetime(2025, 1, 1, 23, 30), datetime(2025, 1, 2, 0, 10)
DIMS_A = {"engine_id": A, "model": "tiny-llama", "method": "draft_model", "num_spec_tokens": 3}
DIMS_B = {"engine_id": B, "model": "tiny-llama", "method": "ngram", "num_spec_tokens": 2}
DIMS_C = {"engine_id": C, "model": "other", "method": "draft_model", "num_spec_tokens": 3}


@pytest.fixture
def con(connect_rows: Any, outcomes: Any) -> Any:
    o = outcomes
    a: dict[str, Any] = {"engine_instance": "a", "dp_rank": 0}
    b: dict[str, Any] = {"engine_instance": "b", "dp_rank": 1, "method": "ngram", "num_spec_tokens": 2}
    c: dict[str, Any] = {"engine_instance": "c", "dp_rank": 0, "model": "other", "max_model_len": 96,
                         "context_cap_from": 512}
    rows = [
        # engine A, K = 3: 12 request-steps
        o.drafted(3, 2, event_time=DAY1, drafts_verified=2, **a),  # adaptive verification: 2 of 3 verified
        o.drafted(3, 0, event_time=DAY1, **a),
        o.drafted(2, 2, event_time=DAY1, **a),
        o.skipped(3, 0, event_time=DAY1, **a),  # placeholders, rejected
        o.skipped(3, 1, event_time=DAY1, **a),  # a placeholder accepted by chance
        o.skipped(0, event_time=DAY1, **a),  # skipped with nothing scheduled: not even vLLM counts it
        o.grammar_async(0, 3, 0, event_time=DAY2, **a),  # all invalid: vLLM still counts a draft
        o.grammar_async(1, 2, 1, event_time=DAY2, **a),
        o.grammar_sync(2, 1, 1, event_time=DAY2, **a),
        o.k_zero("no_proposal", event_time=DAY2, **a),
        o.k_zero("grammar_truncated", k_invalid=2, event_time=DAY2, **a),
        o.k_zero("length_trim", event_time=DAY2, **a),
        # a step the plugin did not see (its hook was off): vLLM's own counters only, in no metric but one
        o.vllm_only("step_hook_off", 4, 12, 5, event_time=DAY2, **a),
        # engine B, K = 2: 5 request-steps
        *(o.k_zero("no_proposal", **b) for _ in range(3)),
        o.drafted(2, 1, **b),
        o.k_zero("unknown", **b),
        # engine C: only k_zero
        o.k_zero("schedule", **c),
        o.k_zero("schedule", **c),
    ]
    return connect_rows(rows)


def rows_of(con: Any, view: str) -> list[dict[str, Any]]:
    return list(run_query(con, f"SELECT * FROM {view}").to_pylist())


def test_request_steps(con: Any) -> None:
    rows = rows_of(con, "request_steps")
    assert len(rows) == 19
    a = [r for r in rows if r["engine_id"] == A]
    assert len(a) == 12
    assert sum(r["is_draft"] for r in a) == 5
    assert sum(r["is_vllm_draft"] for r in a) == 8
    assert {(r["dt"], r["hour"]) for r in a} == {(date(2025, 1, 1), 23), (date(2025, 1, 2), 0)}
    assert {r["event_time"] for r in a} == {DAY1, DAY2}
    described = run_query(con, "SELECT column_name, column_type FROM (DESCRIBE request_steps)").to_pylist()
    types = {r["column_name"]: r["column_type"] for r in described}
    for column in ("dp_rank", "num_spec_tokens", "k_sched", "k_valid", "k_invalid", "accepted", "emitted", "hour"):
        assert types[column] == "INTEGER", column
    assert types["event_time"] == "TIMESTAMP"
    assert types["is_draft"] == types["is_vllm_draft"] == "BOOLEAN"
    grammar = sorted((r["k_sched"], r["k_valid"], r["k_invalid"], r["is_draft"], r["is_vllm_draft"])
                     for r in a if r["kind"] == "grammar_invalid")
    assert grammar == [(2, 2, 1, True, True), (3, 0, 3, False, True), (3, 1, 2, True, True)]
    k_zero_reasons = sorted(r["k_zero_reason"] for r in rows if r["kind"] == "k_zero")
    assert k_zero_reasons == ["grammar_truncated", "length_trim", "no_proposal", "no_proposal", "no_proposal",
                       "no_proposal", "schedule", "schedule", "unknown"]
    assert all(r["k_zero_reason"] is None for r in rows if r["kind"] != "k_zero")


def test_acceptance_corrected(con: Any) -> None:
    assert rows_of(con, "acceptance") == [
        {**DIMS_A, "num_drafts": 5, "num_draft_tokens": 11, "num_accepted_tokens": 6,
         "acceptance_rate": pytest.approx(6 / 11), "mean_acceptance_length": pytest.approx(2.2)},
        {**DIMS_B, "num_drafts": 1, "num_draft_tokens": 2, "num_accepted_tokens": 1,
         "acceptance_rate": pytest.approx(0.5), "mean_acceptance_length": pytest.approx(2.0)},
        {**DIMS_C, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0,
         "acceptance_rate": None, "mean_acceptance_length": None},
    ]


def test_acceptance_vllm(con: Any) -> None:
    assert rows_of(con, "acceptance_vllm") == [
        {**DIMS_A, "num_drafts": 8, "num_draft_tokens": 17, "num_accepted_tokens": 7,
         "acceptance_rate": pytest.approx(7 / 17), "mean_acceptance_length": pytest.approx(1.875)},
        {**DIMS_B, "num_drafts": 1, "num_draft_tokens": 2, "num_accepted_tokens": 1,
         "acceptance_rate": pytest.approx(0.5), "mean_acceptance_length": pytest.approx(2.0)},
        {**DIMS_C, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0,
         "acceptance_rate": None, "mean_acceptance_length": None},
    ]


def test_vllm_overcounts_exactly_the_skipped_and_all_invalid_drafts(con: Any) -> None:
    table = run_query(con, """
        SELECT v.engine_id, v.num_drafts - c.num_drafts AS extra,
               (SELECT count(*) FROM request_steps r WHERE r.engine_id = v.engine_id AND (
                    (r.kind = 'skipped_for_length' AND r.k_sched > 0)
                    OR (r.kind = 'grammar_invalid' AND r.k_valid = 0))) AS expected
        FROM acceptance_vllm v JOIN acceptance c USING (engine_id, model, method, num_spec_tokens)
        ORDER BY v.engine_id
    """)
    assert table.to_pylist() == [
        {"engine_id": A, "extra": 3, "expected": 3},
        {"engine_id": B, "extra": 0, "expected": 0},
        {"engine_id": C, "extra": 0, "expected": 0},
    ]


def per_position(dims: dict[str, Any], values: list[tuple[Any, ...]], names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{**dims, "position": i, **{n: pytest.approx(v) if isinstance(v, float) else v for n, v in zip(names, vals)}}
            for i, vals in enumerate(values)]


def test_acceptance_per_position(con: Any) -> None:
    names = ("num_accepted", "num_drafts", "num_reached", "rate_over_drafts", "rate_conditional")
    assert rows_of(con, "acceptance_per_position") == [
        *per_position(DIMS_A, [(4, 5, 5, 0.8, 0.8), (2, 5, 4, 0.4, 0.5), (0, 5, 2, 0.0, 0.0)], names),
        *per_position(DIMS_B, [(1, 1, 1, 1.0, 1.0), (0, 1, 1, 0.0, 0.0)], names),
        *per_position(DIMS_C, [(0, 0, 0, None, None)] * 3, names),
    ]


def test_acceptance_vllm_per_position(con: Any) -> None:
    names = ("num_accepted_tokens_per_pos", "num_drafts", "acceptance_rate")
    assert rows_of(con, "acceptance_vllm_per_position") == [
        *per_position(DIMS_A, [(5, 8, 0.625), (2, 8, 0.25), (0, 8, 0.0)], names),
        *per_position(DIMS_B, [(1, 1, 1.0), (0, 1, 0.0)], names),
        *per_position(DIMS_C, [(0, 0, None)] * 3, names),
    ]


def test_outcome_shares(con: Any) -> None:
    def share(dims: dict[str, Any], kind: str, k_zero_reason: str | None, n: int, of_group: float, of_kind: float
              ) -> dict[str, Any]:
        return {**dims, "kind": kind, "k_zero_reason": k_zero_reason, "request_steps": n,
                "share": pytest.approx(of_group), "share_of_kind": pytest.approx(of_kind)}

    assert rows_of(con, "outcome_shares") == [
        share(DIMS_A, "drafted", None, 3, 3 / 12, 1.0),
        share(DIMS_A, "grammar_invalid", None, 3, 3 / 12, 1.0),
        share(DIMS_A, "k_zero", "grammar_truncated", 1, 1 / 12, 1 / 3),
        share(DIMS_A, "k_zero", "length_trim", 1, 1 / 12, 1 / 3),
        share(DIMS_A, "k_zero", "no_proposal", 1, 1 / 12, 1 / 3),
        share(DIMS_A, "skipped_for_length", None, 3, 3 / 12, 1.0),
        share(DIMS_B, "drafted", None, 1, 0.2, 1.0),
        share(DIMS_B, "k_zero", "no_proposal", 3, 0.6, 0.75),
        share(DIMS_B, "k_zero", "unknown", 1, 0.2, 0.25),
        share(DIMS_C, "k_zero", "schedule", 2, 1.0, 1.0),
    ]
    sums = run_query(con, "SELECT engine_id, sum(share) AS total FROM outcome_shares GROUP BY ALL").to_pylist()
    assert [r["total"] for r in sums] == [pytest.approx(1.0)] * 3


def test_groups_split_on_every_dimension(connect_rows: Any, outcomes: Any) -> None:
    con = connect_rows([
        outcomes.drafted(3, 3),
        outcomes.drafted(3, 1, method="eagle"),
        outcomes.drafted(2, 0, num_spec_tokens=2),
        outcomes.drafted(1, 1, model="m2"),
        outcomes.drafted(1, 0, dp_rank=1),
    ])
    table = run_query(con, "SELECT engine_id, model, method, num_spec_tokens, num_drafts, num_accepted_tokens "
                           "FROM acceptance")
    assert [tuple(r.values()) for r in table.to_pylist()] == [
        ("a/dp0", "m2", "draft_model", 3, 1, 1),
        ("a/dp0", "tiny-llama", "draft_model", 2, 1, 0),
        ("a/dp0", "tiny-llama", "draft_model", 3, 1, 3),
        ("a/dp0", "tiny-llama", "eagle", 3, 1, 1),
        ("a/dp1", "tiny-llama", "draft_model", 3, 1, 0),
    ]


def test_every_public_view_has_rows(con: Any) -> None:
    # One request per group here: none stands out from its group; no model here has a published baseline
    # (tests/queries/test_queries_analysis.py has both).
    for view in set(PUBLIC_VIEWS) - {"request_outliers", "baseline_comparison"}:
        assert run_query(con, f"SELECT count(*) AS n FROM {view}").column("n")[0].as_py() > 0, view


def test_acceptance_diff(con: Any) -> None:
    nulls = {"acceptance_rate": None, "vllm_acceptance_rate": None, "acceptance_rate_diff": None,
             "mean_acceptance_length": None, "vllm_mean_acceptance_length": None, "mean_acceptance_length_diff": None}
    assert rows_of(con, "acceptance_diff") == [
        {**DIMS_A, "num_drafts": 5, "vllm_num_drafts": 8, "extra_vllm_drafts": 3, "num_draft_tokens": 11,
         "vllm_num_draft_tokens": 17, "num_accepted_tokens": 6, "vllm_num_accepted_tokens": 7,
         "acceptance_rate": pytest.approx(6 / 11), "vllm_acceptance_rate": pytest.approx(7 / 17),
         "acceptance_rate_diff": pytest.approx(6 / 11 - 7 / 17),
         "mean_acceptance_length": pytest.approx(2.2), "vllm_mean_acceptance_length": pytest.approx(1.875),
         "mean_acceptance_length_diff": pytest.approx(0.325)},
        {**DIMS_B, "num_drafts": 1, "vllm_num_drafts": 1, "extra_vllm_drafts": 0, "num_draft_tokens": 2,
         "vllm_num_draft_tokens": 2, "num_accepted_tokens": 1, "vllm_num_accepted_tokens": 1,
         "acceptance_rate": 0.5, "vllm_acceptance_rate": 0.5, "acceptance_rate_diff": 0.0,
         "mean_acceptance_length": 2.0, "vllm_mean_acceptance_length": 2.0, "mean_acceptance_length_diff": 0.0},
        {**DIMS_C, "num_drafts": 0, "vllm_num_drafts": 0, "extra_vllm_drafts": 0, "num_draft_tokens": 0,
         "vllm_num_draft_tokens": 0, "num_accepted_tokens": 0, "vllm_num_accepted_tokens": 0, **nulls},
    ]


def test_k_zero_reasons(con: Any) -> None:
    def k_zero_reason(dims: dict[str, Any], name: str, n: int, of_k_zero: float, of_steps: float, invalid: int
                      ) -> dict[str, Any]:
        return {**dims, "k_zero_reason": name, "request_steps": n, "share_of_k_zero": pytest.approx(of_k_zero),
                "share_of_request_steps": pytest.approx(of_steps), "invalid_tokens": invalid, "emitted_tokens": 0}

    assert rows_of(con, "k_zero_reasons") == [
        k_zero_reason(DIMS_A, "grammar_truncated", 1, 1 / 3, 1 / 12, 2),
        k_zero_reason(DIMS_A, "length_trim", 1, 1 / 3, 1 / 12, 0),
        k_zero_reason(DIMS_A, "no_proposal", 1, 1 / 3, 1 / 12, 0),
        k_zero_reason(DIMS_B, "no_proposal", 3, 0.75, 0.6, 0),
        k_zero_reason(DIMS_B, "unknown", 1, 0.25, 0.2, 0),
        k_zero_reason(DIMS_C, "schedule", 2, 1.0, 1.0, 0),
    ]


def test_grammar_invalid(con: Any) -> None:
    zeros = {"grammar_invalid_steps": 0, "all_invalid_steps": 0, "truncated_to_zero_steps": 0, "share": 0.0,
             "valid_tokens": 0, "invalid_tokens": 0, "invalid_token_share": None, "accepted_tokens": 0,
             "verified_invalid_tokens": 0}
    assert rows_of(con, "grammar_invalid") == [
        # async (0 valid, 3 pads), async (1, 2), sync (2 valid, 1 truncated), and a k_zero cut to nothing (2)
        {**DIMS_A, "request_steps": 12, "grammar_invalid_steps": 3, "all_invalid_steps": 1,
         "truncated_to_zero_steps": 1, "share": 0.25, "valid_tokens": 3, "invalid_tokens": 8,
         "invalid_token_share": pytest.approx(8 / 11), "accepted_tokens": 2, "verified_invalid_tokens": 0},
        {**DIMS_B, "request_steps": 5, **zeros},
        {**DIMS_C, "request_steps": 2, **zeros},
    ]


def test_wasted_verification(con: Any) -> None:
    assert rows_of(con, "wasted_verification") == [
        # verified: drafted 3 + 3 + 2, skipped 3 + 3 + 0, grammar 3 + 3 + 2; placeholders 3 + 3;
        # pads: the async grammar-invalid drafts' 3 + 2
        {**DIMS_A, "verified_slots": 22, "placeholder_slots": 6, "pad_slots": 5, "wasted_slots": 11,
         "wasted_share": 0.5},
        {**DIMS_B, "verified_slots": 2, "placeholder_slots": 0, "pad_slots": 0, "wasted_slots": 0,
         "wasted_share": 0.0},
        {**DIMS_C, "verified_slots": 0, "placeholder_slots": 0, "pad_slots": 0, "wasted_slots": 0,
         "wasted_share": None},
    ]


def test_vllm_only_steps_hold_vllms_own_counters_and_no_other_view_counts_them(con: Any) -> None:
    assert rows_of(con, "vllm_only_steps") == [
        {"engine_id": A, "vllm_version": "0.32.0", "model": "tiny-llama", "method": "draft_model",
         "vllm_only": "step_hook_off", "steps": 1, "first_event_time": DAY2,
         "last_event_time": DAY2, "num_drafts": 4, "num_draft_tokens": 12, "num_accepted_tokens": 5,
         "acceptance_rate": 5 / 12, "mean_acceptance_length": 1 + 5 / 4}]
    assert run_query(con, "SELECT count(*) AS n FROM all_request_steps").to_pylist() == [{"n": 20}]
    assert run_query(con, "SELECT count(*) AS n FROM request_steps WHERE request_id = '*'").to_pylist() == [{"n": 0}]
