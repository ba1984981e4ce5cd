"""The analysis views against the load generator's exact ground truth: one model at K = 3 and K = 5
(two engines each, sync scheduling: a verified slot is a scheduled one), with a published baseline
for K = 3, through the local log and ingest; the per-request views against its per-request counts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from specmetrics.emitter.loadgen import EngineTruth
from specmetrics.queries import connect, run_query
from tests.support.ingest import ingest_once
from tests.support.loadgen import write_load

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[int, list[EngineTruth]]]]:
    root = tmp_path_factory.mktemp("ground-truth")
    truth = {k: list(write_load(root / "log", rows=20_000, engines=2, seed=k, batch_size=32, num_spec_tokens=k,
                                acceptance=(0.8, 0.6, 0.5), drafter_max_len=1800, grammar_invalid_rate=0.05,
                                k_zero_rate=0.05, scheduling="sync", model=MODEL, method="eagle3",
                                engine_prefix=f"k{k}", request_truth=True).values())
             for k in (3, 5)}
    ingest_once(root / "log", root / "data")
    con = connect(root / "data")
    yield con, truth
    con.close()


def test_k_comparison_equals_ground_truth(loaded: tuple[Any, dict[int, list[EngineTruth]]]) -> None:
    con, truth = loaded
    got = {r["num_spec_tokens"]: r for r in run_query(con, "FROM k_comparison").to_pylist()}
    assert set(got) == {3, 5}
    for k, engines in truth.items():
        steps = sum(t.vllm_num_drafts for t in engines)  # no K = 0 here schedules a slot: every vLLM draft is verified
        accepted = sum(t.vllm_num_accepted_tokens for t in engines)
        slots = sum(t.vllm_num_draft_tokens for t in engines)  # sync: what is scheduled is valid or a placeholder
        row = got[k]
        assert (row["engines"], row["verify_steps"]) == (2, steps)
        assert row["tokens_per_verify_step"] == pytest.approx(1 + accepted / steps)
        assert row["accepted_per_verified_slot"] == pytest.approx(accepted / slots)
        assert row["acceptance_rate"] == pytest.approx(sum(t.num_accepted_tokens for t in engines)
                                                       / sum(t.num_draft_tokens for t in engines))
    ranked = sorted(got.values(), key=lambda r: r["rank_in_model"])
    assert [r["rank_in_model"] for r in ranked] == [1, 2]
    assert ranked[0]["tokens_per_verify_step"] > ranked[1]["tokens_per_verify_step"]


def test_wasted_verification_equals_ground_truth(loaded: tuple[Any, dict[int, list[EngineTruth]]]) -> None:
    con, truth = loaded
    got = {r["engine_id"]: r for r in run_query(con, "FROM wasted_verification").to_pylist()}
    engines = [(k, t) for k, ts in truth.items() for t in ts]
    assert len(got) == len(engines)
    expected = sorted((t.vllm_num_draft_tokens, k * t.request_steps.get("skipped_for_length", 0)) for k, t in engines)
    assert sorted((r["verified_slots"], r["placeholder_slots"]) for r in got.values()) == expected
    assert all(r["pad_slots"] == 0 for r in got.values())  # sync: invalid drafts were cut, not padded
    assert sum(r["placeholder_slots"] for r in got.values()) > 0
    timeline = run_query(con, "SELECT engine_id, sum(verified_slots) AS verified, sum(wasted_slots) AS wasted, "
                              "count(*) AS buckets, min(wasted_share) AS low, max(wasted_share) AS high "
                              "FROM wasted_verification_timeline(bucket := INTERVAL 2 SECOND) GROUP BY ALL").to_pylist()
    assert {r["engine_id"]: (r["verified"], r["wasted"]) for r in timeline} == {
        e: (r["verified_slots"], r["wasted_slots"]) for e, r in got.items()}
    assert all(r["buckets"] > 1 and r["low"] < r["high"] for r in timeline)


def test_collateral_skips_equal_ground_truth(loaded: tuple[Any, dict[int, list[EngineTruth]]]) -> None:
    """Skips told apart by the request's own length, the draft tokens the collateral ones lost, and
    the tokens they would have accepted at their request's own rate (the engine's where it never
    drafted), per engine and, summed, over the timeline's buckets."""
    con, truth = loaded
    got = {r["engine_id"]: r for r in run_query(con, "FROM collateral_skips").to_pylist()}
    engines = engine_truths(truth)
    assert set(got) == set(engines)
    for engine_id, t in engines.items():
        row, requests = got[engine_id], t.requests or {}
        group_rate = t.num_accepted_tokens / t.num_draft_tokens
        estimated = sum(r.lost_draft_tokens * (r.num_accepted_tokens / r.num_draft_tokens if r.num_draft_tokens
                                               else group_rate) for r in requests.values())
        assert (row["skips"], row["collateral_skips"], row["own_skips"], row["unknown_skips"]) == (
            t.request_steps["skipped_for_length"], t.collateral_skips, t.own_skips, 0)
        assert row["lost_draft_tokens"] == t.lost_draft_tokens
        assert row["estimated_accepted_tokens"] == pytest.approx(estimated)
        assert row["estimated_from_group"] == sum(r.collateral_skips for r in requests.values() if not r.num_drafts)
        assert row["collateral_share"] == pytest.approx(t.collateral_skips / t.request_steps["skipped_for_length"])
        assert row["acceptance_rate"] == pytest.approx(group_rate)
        assert row["acceptance_rate_had_drafted"] == pytest.approx(
            (t.num_accepted_tokens + estimated) / (t.num_draft_tokens + t.lost_draft_tokens))
        assert row["mean_acceptance_length_had_drafted"] == pytest.approx(
            1 + (t.num_accepted_tokens + estimated) / (t.num_drafts + t.collateral_skips))
    assert all(r["collateral_skips"] > r["own_skips"] > 0 for r in got.values())
    timeline = run_query(con, "SELECT engine_id, sum(collateral_skips) AS c, sum(lost_draft_tokens) AS lost, "
                              "sum(estimated_accepted_tokens) AS est, count(*) AS buckets "
                              "FROM collateral_skips_timeline(bucket := INTERVAL 2 SECOND) GROUP BY ALL").to_pylist()
    assert {r["engine_id"]: (r["c"], r["lost"]) for r in timeline} == {
        e: (r["collateral_skips"], r["lost_draft_tokens"]) for e, r in got.items()}
    assert all(r["est"] == pytest.approx(got[r["engine_id"]]["estimated_accepted_tokens"]) and r["buckets"] > 1
               for r in timeline)


def test_baseline_comparison_equals_ground_truth(loaded: tuple[Any, dict[int, list[EngineTruth]]]) -> None:
    con, truth = loaded
    got = run_query(con, "FROM baseline_comparison").to_pylist()
    assert [(r["num_spec_tokens"], r["position"]) for r in got] == [(3, 0), (3, 1), (3, 2)]  # no baseline for K = 5
    engines = truth[3]
    drafts, vllm_drafts = sum(t.num_drafts for t in engines), sum(t.vllm_num_drafts for t in engines)
    for r in got:
        i = r["position"]
        assert r["rate"] == pytest.approx(sum(t.accepted_per_pos[i] for t in engines) / drafts)
        assert r["vllm_rate"] == pytest.approx(sum(t.vllm_accepted_per_pos[i] for t in engines) / vllm_drafts)
        assert r["baseline_rate"] == [0.7296, 0.5208, 0.3545][i]
    assert got[0]["acceptance_length"] == pytest.approx(1 + sum(t.num_accepted_tokens for t in engines) / drafts)


def engine_truths(truth: dict[int, list[EngineTruth]]) -> dict[str, EngineTruth]:
    """The ground truth per engine id (``k<K>-<index>/dp0``, as the load generator names them)."""
    return {f"k{k}-{i}/dp0": t for k, engines in truth.items() for i, t in enumerate(engines)}


def test_acceptance_histogram_equals_ground_truth(loaded: tuple[Any, dict[int, list[EngineTruth]]]) -> None:
    con, truth = loaded
    got = run_query(con, "FROM acceptance_histogram_between(NULL, NULL, buckets := 5)").to_pylist()
    for engine_id, t in engine_truths(truth).items():
        assert t.requests is not None
        rated = [r.num_accepted_tokens / r.num_draft_tokens for r in t.requests.values() if r.num_draft_tokens]
        counts = [0] * 5
        for rate in rated:
            counts[min(int(rate * 5), 4)] += 1
        rows = sorted((r for r in got if r["engine_id"] == engine_id), key=lambda r: r["bucket"])
        assert [r["bucket"] for r in rows] == [0, 1, 2, 3, 4]
        assert [r["requests"] for r in rows] == counts
        assert [r["share"] for r in rows] == pytest.approx([c / len(rated) for c in counts])
        assert [r["lower_rate"] for r in rows] == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])
        assert sum(counts) == len(rated) > 40 and max(counts) < len(rated)  # requests spread over buckets


def test_request_outliers_equal_ground_truth(loaded: tuple[Any, dict[int, list[EngineTruth]]]) -> None:
    con, truth = loaded
    got = run_query(con, "FROM request_outliers_between(NULL, NULL, margin := 0.1, min_drafts := 8)").to_pylist()
    expected = {}
    for engine_id, t in engine_truths(truth).items():
        assert t.requests is not None
        pooled = t.num_accepted_tokens / t.num_draft_tokens
        for request_id, r in t.requests.items():
            rate = r.num_accepted_tokens / r.num_draft_tokens if r.num_draft_tokens else None
            if r.num_drafts >= 8 and rate is not None and abs(rate - pooled) >= 0.1:
                expected[engine_id, request_id] = ("low" if rate < pooled else "high", rate, r.num_drafts,
                                                   r.request_steps)
    assert {(r["engine_id"], r["request_id"]): (r["direction"], pytest.approx(r["acceptance_rate"]), r["num_drafts"],
                                                r["request_steps"]) for r in got} == expected
    assert {direction for direction, *_ in expected.values()} == {"low", "high"}

