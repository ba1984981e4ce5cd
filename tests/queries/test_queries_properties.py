"""Property test: on any valid set of request-steps, the views agree with a direct count in
Python and keep their invariants."""

from __future__ import annotations

import itertools
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.queries import connect, run_query
from tests.support.outcomes import outcome

Key = tuple[str, str, str, int]


def expected(rows: list[dict[str, Any]]) -> dict[Key, dict[Any, int]]:
    """The views' counts, computed row by row."""
    out: dict[Key, dict[Any, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        g = out[(r["engine_id"], r["model"], r["method"], r["num_spec_tokens"])]
        g["rows"] += 1
        grammar = r["kind"] in ("grammar_invalid", "grammar_rejected")
        if r["kind"] == "drafted" or (grammar and r["k_valid"] > 0):
            g["drafts"] += 1
            g["tokens"] += r["k_valid"]
            g["accepted"] += r["accepted"]
            for i in range(r["num_spec_tokens"]):
                g[("acc", i)] += r["accepted"] >= i + 1
                g[("reached", i)] += r["k_valid"] >= i + 1
        if r["k_sched"] > 0:
            g["v_drafts"] += 1
            # vLLM counts every verified slot: the invalid draft grammar_rejected verified too
            g["v_tokens"] += r["k_sched"] if r["kind"] == "grammar_rejected" else r["k_valid"]
            g["v_accepted"] += r["accepted"]
            for i in range(r["accepted"]):
                g[("v_acc", i)] += 1
        g["skipped_sched"] += r["kind"] == "skipped_for_length" and r["k_sched"] > 0
        g["all_invalid"] += grammar and r["k_valid"] == 0
        g["unverified"] += r["k_zero_reason"] == "verify_budget"
        g["grammar"] += grammar
        g["k_zero"] += r["kind"] == "k_zero"
    return out


def by_group(con: Any, view: str) -> dict[Key, list[dict[str, Any]]]:
    out: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for r in run_query(con, f"SELECT * FROM {view}").to_pylist():
        out[(r["engine_id"], r["model"], r["method"], r["num_spec_tokens"])].append(r)
    return out


def check(con: Any, rows: list[dict[str, Any]]) -> None:
    want = expected(rows)
    corrected, vllm = by_group(con, "acceptance"), by_group(con, "acceptance_vllm")
    per_pos, vllm_pos = by_group(con, "acceptance_per_position"), by_group(con, "acceptance_vllm_per_position")
    shares = by_group(con, "outcome_shares")
    assert set(corrected) == set(vllm) == set(per_pos) == set(vllm_pos) == set(shares) == set(want)
    for key, g in want.items():
        k = key[3]
        [c], [v] = corrected[key], vllm[key]
        assert (c["num_drafts"], c["num_draft_tokens"], c["num_accepted_tokens"]) == (
            g["drafts"], g["tokens"], g["accepted"])
        assert (v["num_drafts"], v["num_draft_tokens"], v["num_accepted_tokens"]) == (
            g["v_drafts"], g["v_tokens"], g["v_accepted"])
        # vLLM's extra drafts are exactly the placeholder and all-invalid request-steps
        assert v["num_drafts"] == c["num_drafts"] + g["skipped_sched"] + g["all_invalid"] + g["unverified"]
        for m in (c, v):
            assert (m["acceptance_rate"] is None) == (m["num_draft_tokens"] == 0)
            assert (m["mean_acceptance_length"] is None) == (m["num_drafts"] == 0)
            if m["acceptance_rate"] is not None:
                assert 0.0 <= m["acceptance_rate"] <= 1.0
            if m["mean_acceptance_length"] is not None:
                assert 1.0 <= m["mean_acceptance_length"] <= k + 1
        assert [p["position"] for p in per_pos[key]] == list(range(k))
        assert [p["position"] for p in vllm_pos[key]] == list(range(k))
        assert [(p["num_accepted"], p["num_reached"], p["num_drafts"]) for p in per_pos[key]] == [
            (g[("acc", i)], g[("reached", i)], g["drafts"]) for i in range(k)]
        assert [(p["num_accepted_tokens_per_pos"], p["num_drafts"]) for p in vllm_pos[key]] == [
            (g[("v_acc", i)], g["v_drafts"]) for i in range(k)]
        # per-position counts add up to the token totals
        assert sum(p["num_accepted"] for p in per_pos[key]) == c["num_accepted_tokens"]
        assert sum(p["num_reached"] for p in per_pos[key]) == c["num_draft_tokens"]
        assert sum(p["num_accepted_tokens_per_pos"] for p in vllm_pos[key]) == v["num_accepted_tokens"]
        for rates in (
            [p["rate_over_drafts"] for p in per_pos[key]],
            [p["acceptance_rate"] for p in vllm_pos[key]],
        ):
            if rates[0] is None:
                assert rates == [None] * k
                continue
            assert all(0.0 <= r <= 1.0 for r in rates)
            assert all(a >= b for a, b in itertools.pairwise(rates))  # non-increasing with position
        assert all(p["rate_conditional"] is None or 0.0 <= p["rate_conditional"] <= 1.0 for p in per_pos[key])
        assert sum(s["request_steps"] for s in shares[key]) == g["rows"]
        assert sum(s["share"] for s in shares[key]) == pytest.approx(1.0)
        for kind in {s["kind"] for s in shares[key]}:
            assert sum(s["share_of_kind"] for s in shares[key] if s["kind"] == kind) == pytest.approx(1.0)
        check_breakdowns(con, key, g, c, v)


def check_breakdowns(con: Any, key: Key, g: dict[Any, int], c: dict[str, Any], v: dict[str, Any]) -> None:
    """The views past the foundation set agree with the totals of acceptance and acceptance_vllm."""
    k = key[3]
    [diff] = by_group(con, "acceptance_diff")[key]
    assert diff["extra_vllm_drafts"] == g["skipped_sched"] + g["all_invalid"] + g["unverified"]
    assert (diff["num_drafts"], diff["vllm_num_drafts"]) == (c["num_drafts"], v["num_drafts"])
    if c["acceptance_rate"] is not None and v["acceptance_rate"] is not None:
        assert diff["acceptance_rate_diff"] == pytest.approx(c["acceptance_rate"] - v["acceptance_rate"])
    timeline = [r for r in run_query(con, "FROM acceptance_timeline(bucket := INTERVAL 1 HOUR)").to_pylist()
                if (r["engine_id"], r["model"], r["method"], r["num_spec_tokens"]) == key]
    assert sum(r["request_steps"] for r in timeline) == g["rows"]
    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        assert sum(r[name] for r in timeline) == c[name]
        assert sum(r[f"vllm_{name}"] for r in timeline) == v[name]
    for r in timeline:
        for rate in (r["acceptance_rate"], r["vllm_acceptance_rate"]):
            assert rate is None or 0.0 <= rate <= 1.0
    [per_request] = by_group(con, "acceptance_per_request")[key]
    for name in ("per_request_mean_acceptance_length", "pooled_mean_acceptance_length"):
        assert per_request[name] is None or 1.0 <= per_request[name] <= k + 1
    assert per_request["pooled_mean_acceptance_length"] == (
        None if c["mean_acceptance_length"] is None else pytest.approx(c["mean_acceptance_length"]))
    assert per_request["per_request_acceptance_rate"] is None or 0.0 <= per_request["per_request_acceptance_rate"] <= 1
    contexts = by_group(con, "skips_by_context")[key]
    assert sum(r["request_steps"] for r in contexts) == g["rows"]
    assert sum(r["num_drafts"] for r in contexts) == c["num_drafts"]
    assert all(0.0 <= r["skip_share"] <= 1.0 for r in contexts)
    k_zero_reasons = by_group(con, "k_zero_reasons").get(key, [])
    assert sum(r["request_steps"] for r in k_zero_reasons) == g["k_zero"]
    if k_zero_reasons:
        assert sum(r["share_of_k_zero"] for r in k_zero_reasons) == pytest.approx(1.0)
    [grammar] = by_group(con, "grammar_invalid")[key]
    assert (grammar["grammar_invalid_steps"], grammar["all_invalid_steps"]) == (g["grammar"], g["all_invalid"])
    assert grammar["invalid_token_share"] is None or 0.0 <= grammar["invalid_token_share"] <= 1.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(outcome(), min_size=1, max_size=40))
def test_views_match_a_direct_count(outcomes: Any, drawn: list[dict[str, Any]]) -> None:
    rows = [outcomes.row(**d) for d in drawn]
    with tempfile.TemporaryDirectory() as tmp:
        con = connect(outcomes.write_table(Path(tmp) / "data", rows))
        try:
            check(con, rows)
        finally:
            con.close()
