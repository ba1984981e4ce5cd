"""The views that answer what vLLM's counters cannot: each request's acceptance as a histogram,
the requests far from their group, and the configurations of a model ranked by what a
verification yields. Against numbers computed by hand, and against a direct count on drawn rows."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.queries import run_query
from tests.support.outcomes import OutcomeRows, outcome

A = {"engine_id": "a/dp0", "model": "m", "method": "draft_model", "num_spec_tokens": 3}


@pytest.fixture
def con(connect_rows: Any, outcomes: OutcomeRows) -> Any:
    o = outcomes
    a: dict[str, Any] = {"engine_instance": "a", "model": "m", "num_spec_tokens": 3}
    return connect_rows([
        *(o.drafted(3, 3, request_id="r1", **a) for _ in range(8)),  # rate 1.0, 8 drafts
        *(o.drafted(3, 0, request_id="r2", **a) for _ in range(8)),  # rate 0.0
        *(o.drafted(2, 1, request_id="r3", **a) for _ in range(2)),  # rate 0.5, 2 drafts
        o.k_zero("no_proposal", request_id="r4", **a),  # no draft token: in no bucket
        *(o.drafted(3, 3, request_id="c1", engine_instance="c", model="m", num_spec_tokens=3) for _ in range(2)),
        *(o.drafted(5, 4, request_id="b1", engine_instance="b", model="m", num_spec_tokens=5) for _ in range(2)),
        o.skipped(5, request_id="b1", engine_instance="b", model="m", num_spec_tokens=5),  # placeholders verified
        o.drafted(1, 1, request_id="d1", engine_instance="d", model="other", num_spec_tokens=1),
    ])


def rows(con: Any, sql: str) -> list[dict[str, Any]]:
    return list(run_query(con, sql).to_pylist())


def test_acceptance_histogram(con: Any) -> None:
    got = rows(con, "SELECT bucket, lower_rate, upper_rate, requests, share FROM acceptance_histogram "
                    "WHERE engine_id = 'a/dp0'")
    assert [(r["bucket"], r["requests"]) for r in got] == [(b, 1 if b in (0, 5, 9) else 0) for b in range(10)]
    assert got[9]["lower_rate"] == pytest.approx(0.9) and got[9]["upper_rate"] == pytest.approx(1.0)
    assert [r["share"] for r in got if r["requests"]] == [pytest.approx(1 / 3)] * 3
    four = rows(con, "SELECT bucket, requests FROM acceptance_histogram_between(NULL, NULL, buckets := 4) "
                     "WHERE engine_id = 'a/dp0' ORDER BY bucket")
    assert four == [{"bucket": 0, "requests": 1}, {"bucket": 1, "requests": 0}, {"bucket": 2, "requests": 1},
                    {"bucket": 3, "requests": 1}]


def test_request_outliers(con: Any) -> None:
    got = rows(con, "SELECT request_id, direction, acceptance_rate, group_acceptance_rate, difference, num_drafts, "
                    "num_draft_tokens, num_accepted_tokens, request_steps, emitted_tokens FROM request_outliers")
    assert got == [  # the group's rate: 26 accepted of 52 draft tokens; r3 is at it, with 2 drafts anyway
        {"request_id": "r1", "direction": "high", "acceptance_rate": 1.0, "group_acceptance_rate": 0.5,
         "difference": 0.5, "num_drafts": 8, "num_draft_tokens": 24, "num_accepted_tokens": 24, "request_steps": 8,
         "emitted_tokens": 32},
        {"request_id": "r2", "direction": "low", "acceptance_rate": 0.0, "group_acceptance_rate": 0.5,
         "difference": -0.5, "num_drafts": 8, "num_draft_tokens": 24, "num_accepted_tokens": 0, "request_steps": 8,
         "emitted_tokens": 8},
    ]
    assert rows(con, "SELECT request_id FROM request_outliers_between(NULL, NULL, margin := 0.6)") == []
    looser = rows(con, "SELECT request_id FROM request_outliers_between(NULL, NULL, margin := 0.25, min_drafts := 1) "
                       "ORDER BY request_id")
    assert looser == [{"request_id": "r1"}, {"request_id": "r2"}]  # c1 and b1 are their engines' only requests


def test_k_comparison(con: Any) -> None:
    got = rows(con, "SELECT * FROM k_comparison")
    assert got == [
        {"model": "m", "method": "draft_model", "num_spec_tokens": 5, "engines": 1, "verify_steps": 3,
         "tokens_per_verify_step": pytest.approx(1 + 8 / 3), "accepted_per_verified_slot": pytest.approx(8 / 15),
         "acceptance_rate": pytest.approx(0.8), "mean_acceptance_length": pytest.approx(5.0), "rank_in_model": 1},
        {"model": "m", "method": "draft_model", "num_spec_tokens": 3, "engines": 2, "verify_steps": 20,
         "tokens_per_verify_step": pytest.approx(2.6), "accepted_per_verified_slot": pytest.approx(32 / 58),
         "acceptance_rate": pytest.approx(32 / 58), "mean_acceptance_length": pytest.approx(2.6), "rank_in_model": 2},
        {"model": "other", "method": "draft_model", "num_spec_tokens": 1, "engines": 1, "verify_steps": 1,
         "tokens_per_verify_step": pytest.approx(2.0), "accepted_per_verified_slot": pytest.approx(1.0),
         "acceptance_rate": pytest.approx(1.0), "mean_acceptance_length": pytest.approx(2.0), "rank_in_model": 1},
    ]


def test_baseline_comparison_puts_a_configuration_next_to_its_models_published_baseline(
        connect_rows: Any, outcomes: OutcomeRows) -> None:
    """A Llama-3.1-8B-Instruct served from a local path with EAGLE-3 at K = 3 (two engines) matches the
    published row; the same model at K = 5 and another model do not. Skips count as drafts for vLLM,
    not for the corrected rates."""
    o = outcomes
    llama = {"model": "/models/Llama-3.1-8B-Instruct", "method": "eagle3", "num_spec_tokens": 3}
    con = connect_rows([
        *(o.drafted(3, 3, engine_instance="a", **llama) for _ in range(3)),
        o.drafted(3, 3, engine_instance="b", **llama),
        *(o.drafted(3, 1, engine_instance="b", **llama) for _ in range(2)),
        *(o.drafted(3, 0, engine_instance="a", **llama) for _ in range(2)),
        *(o.skipped(3, engine_instance="a", **llama) for _ in range(2)),
        o.drafted(5, 5, engine_instance="c", **{**llama, "num_spec_tokens": 5}),
        o.drafted(3, 3, engine_instance="d", model="m", method="eagle3", num_spec_tokens=3),
    ])
    got = rows(con, "SELECT * FROM baseline_comparison")
    published = [0.7296, 0.5208, 0.3545]
    corrected, vllm = [6 / 8, 4 / 8, 4 / 8], [6 / 10, 4 / 10, 4 / 10]
    assert got == [
        {"model": llama["model"], "method": "eagle3", "num_spec_tokens": 3, "position": i,
         "rate": pytest.approx(corrected[i]), "vllm_rate": pytest.approx(vllm[i]),
         "baseline_rate": pytest.approx(published[i]), "difference": pytest.approx(corrected[i] - published[i]),
         "acceptance_length": pytest.approx(2.75), "baseline_acceptance_length": pytest.approx(2.60),
         "baseline_model": "meta-llama/Llama-3.1-8B-Instruct",
         "baseline_drafter": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
         "dataset": "MT-Bench (philschmid/mt-bench), 80 prompts, 256 output tokens",
         "sampling": "greedy (temperature 0)",
         "source": "vllm-project/vllm tests/v1/spec_decode/test_acceptance_length.py at 029ba37503c5"}
        for i in range(3)
    ]
    # The same numbers as the per-position views, pooled over the two engines.
    pooled = rows(con, "SELECT position, sum(num_accepted) / sum(num_drafts) AS rate FROM acceptance_per_position "
                       f"WHERE model = '{llama['model']}' AND num_spec_tokens = 3 GROUP BY position ORDER BY position")
    assert [r["rate"] for r in pooled] == [pytest.approx(r["rate"]) for r in got]
    assert len(rows(con, "SELECT * FROM baselines")) == 4 * 3


def test_a_length_at_the_contract_s_limit_is_an_own_skip(connect_rows: Any, outcomes: OutcomeRows) -> None:
    """seq_len up to 2**31 - 1 is valid: plus K it passes INTEGER, and must not overflow."""
    con = connect_rows([outcomes.skipped(5, num_spec_tokens=5, seq_len=2**31 - 4, drafter_max_len=2**31 - 1),
                        outcomes.skipped(5, num_spec_tokens=5, seq_len=2**31 - 6, drafter_max_len=2**31 - 1)])
    assert rows(con, "SELECT skips, collateral_skips, own_skips FROM collateral_skips") == [
        {"skips": 2, "collateral_skips": 1, "own_skips": 1}]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=st.lists(outcome(), min_size=1, max_size=40))
def test_the_views_match_a_direct_count(connect_rows: Any, outcomes: OutcomeRows, drawn: list[dict[str, Any]]) -> None:
    con = connect_rows([outcomes.row(**kw) for kw in drawn], name=f"drawn-{uuid.uuid4().hex}")
    per_request: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0])  # drafts, tokens, accepted
    per_config: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0])  # verify steps, accepted, slots
    for r in drawn:
        group = (f"{r['engine_instance']}/dp0", r["method"], r["num_spec_tokens"])
        if r["kind"] == "drafted" or (r["kind"] in ("grammar_invalid", "grammar_rejected") and r["k_valid"] > 0):
            counts = per_request[(*group, r["request_id"])]
            counts[0] += 1
            counts[1] += r["k_valid"]
            counts[2] += r["accepted"]
        if r["kind"] != "k_zero" and r["k_sched"] > 0:
            config = per_config[(r["method"], r["num_spec_tokens"])]
            config[0] += 1
            config[1] += r["accepted"]
            config[2] += r["k_sched"]
    expected = defaultdict(int)
    for (*group, _), (_, tokens, accepted) in per_request.items():
        if tokens:
            expected[(*group, min(int(accepted / tokens * 10), 9))] += 1
    histogram = rows(con, "SELECT engine_id, method, num_spec_tokens, bucket, requests FROM acceptance_histogram "
                          "WHERE requests > 0")
    assert {(r["engine_id"], r["method"], r["num_spec_tokens"], r["bucket"]): r["requests"] for r in histogram} \
        == dict(expected)
    pooled: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0])  # tokens, accepted per group
    for (*group, _), (_, tokens, accepted) in per_request.items():
        pooled[tuple(group)][0] += tokens
        pooled[tuple(group)][1] += accepted
    outliers = {}
    for (*group, request), (_, tokens, accepted) in per_request.items():
        group_tokens, group_accepted = pooled[tuple(group)]
        if tokens and abs(accepted / tokens - group_accepted / group_tokens) >= 0.1:
            outliers[(*group, request)] = "low" if accepted / tokens < group_accepted / group_tokens else "high"
    found = rows(con, "SELECT engine_id, method, num_spec_tokens, request_id, direction "
                      "FROM request_outliers_between(NULL, NULL, margin := 0.1, min_drafts := 1)")
    assert {(r["engine_id"], r["method"], r["num_spec_tokens"], r["request_id"]): r["direction"] for r in found} \
        == outliers
    comparison = rows(con, "SELECT method, num_spec_tokens, verify_steps, tokens_per_verify_step FROM k_comparison")
    configs = {(r["method"], r["num_spec_tokens"]) for r in drawn}
    assert {(r["method"], r["num_spec_tokens"]): r["verify_steps"] for r in comparison} == \
        {key: per_config[key][0] if key in per_config else 0 for key in configs}
    for r in comparison:
        steps, accepted, _ = per_config.get((r["method"], r["num_spec_tokens"]), (0, 0, 0))
        assert r["tokens_per_verify_step"] == (pytest.approx(1 + accepted / steps) if steps else None)
    assert_collateral_skips_match(con, drawn, per_request)


def assert_collateral_skips_match(con: Any, drawn: list[dict[str, Any]],
                                  per_request: dict[tuple[Any, ...], list[int]]) -> None:
    """collateral_skips against a direct count: skips by the request's own length, the draft tokens
    the collateral ones lost, and the tokens they would have accepted at their request's rate."""
    groups: dict[tuple[Any, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    lost: dict[tuple[Any, ...], int] = defaultdict(int)  # per request
    for r in drawn:
        group = (f"{r['engine_instance']}/dp0", r["method"], r["num_spec_tokens"])
        counts = groups[group]
        counts["request_steps"] += 1
        if r["kind"] != "skipped_for_length":
            continue
        counts["skips"] += 1
        if r["seq_len"] is None:
            continue
        if r["seq_len"] + r["num_spec_tokens"] <= 96:
            counts["collateral_skips"] += 1
            counts["lost_draft_tokens"] += r["k_valid"]
            lost[(*group, r["request_id"])] += r["k_valid"]
        else:
            counts["own_skips"] += 1
    for (*group, request), tokens in lost.items():
        _, draft_tokens, accepted = per_request.get((*group, request), [0, 0, 0])
        group_tokens = sum(c[1] for (*g, _), c in per_request.items() if tuple(g) == tuple(group))
        group_accepted = sum(c[2] for (*g, _), c in per_request.items() if tuple(g) == tuple(group))
        rate = accepted / draft_tokens if draft_tokens else group_accepted / group_tokens if group_tokens else None
        if rate is not None:
            groups[tuple(group)]["estimated_accepted_tokens"] += tokens * rate
        if not draft_tokens:
            groups[tuple(group)]["estimated_from_group"] += sum(
                1 for r in drawn if r["kind"] == "skipped_for_length" and r["seq_len"] is not None
                and r["seq_len"] + r["num_spec_tokens"] <= 96 and r["request_id"] == request
                and (f"{r['engine_instance']}/dp0", r["method"], r["num_spec_tokens"]) == tuple(group))
    names = ("request_steps", "skips", "collateral_skips", "own_skips", "lost_draft_tokens", "estimated_from_group")
    got = rows(con, f"SELECT engine_id, method, num_spec_tokens, {', '.join(names)}, estimated_accepted_tokens "
                    "FROM collateral_skips")
    assert {(r["engine_id"], r["method"], r["num_spec_tokens"]): tuple(r[n] for n in names) for r in got} == {
        group: tuple(int(counts[n]) for n in names) for group, counts in groups.items()}
    for r in got:
        expected = groups[(r["engine_id"], r["method"], r["num_spec_tokens"])].get("estimated_accepted_tokens")
        assert r["estimated_accepted_tokens"] == (None if expected is None else pytest.approx(expected))
    # Over time: the buckets of each group add up to the group (each request's rate over the window).
    buckets = rows(con, f"SELECT engine_id, method, num_spec_tokens, {', '.join(f'sum({n}) AS {n}' for n in names)}, "
                        "sum(estimated_accepted_tokens) AS estimated_accepted_tokens "
                        "FROM collateral_skips_timeline(bucket := INTERVAL 1 HOUR) GROUP BY ALL")
    assert {(r["engine_id"], r["method"], r["num_spec_tokens"]): tuple(r[n] for n in names) for r in buckets} == {
        (r["engine_id"], r["method"], r["num_spec_tokens"]): tuple(r[n] for n in names) for r in got}
    totals = {(r["engine_id"], r["method"], r["num_spec_tokens"]): r["estimated_accepted_tokens"] for r in got}
    assert all(r["estimated_accepted_tokens"] == (None if totals[key] is None else pytest.approx(totals[key]))
               for r in buckets for key in [(r["engine_id"], r["method"], r["num_spec_tokens"])])
    wasted = rows(con, "SELECT engine_id, method, num_spec_tokens, sum(verified_slots) AS v, sum(wasted_slots) AS w "
                       "FROM wasted_verification_timeline(bucket := INTERVAL 1 HOUR) GROUP BY ALL")
    assert {(r["engine_id"], r["method"], r["num_spec_tokens"]): (r["v"], r["w"]) for r in wasted} == {
        (r["engine_id"], r["method"], r["num_spec_tokens"]): (r["verified_slots"], r["wasted_slots"])
        for r in rows(con, "FROM wasted_verification")}
