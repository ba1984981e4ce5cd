"""The whole embedded path at scale: load generator → local log → ingest → views, checked
against the generator's exact ground truth on 1M request-steps of every kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmetrics.emitter.loadgen import EngineTruth
from specmetrics.queries import connect, run_query
from tests.support.ingest import ingest_once
from tests.support.loadgen import write_load


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, EngineTruth]]:
    root = tmp_path_factory.mktemp("million")
    truth = write_load(root / "log", rows=1_000_000, engines=3, seed=42, batch_size=64, num_spec_tokens=4,
                       acceptance=(0.9, 0.75, 0.6, 0.5), drafter_max_len=2000, grammar_invalid_rate=0.05,
                       k_zero_rate=0.08, scheduling="async")
    stats = ingest_once(root / "log", root / "data")
    assert stats.rows == sum(t.rows for t in truth.values()) >= 1_000_000
    return root / "data", truth


def by_engine(data: Path, sql: str) -> dict[str, dict[str, object]]:
    con = connect(data)
    rows = run_query(con, sql).to_pylist()
    con.close()
    return {str(r.pop("engine_id")): r for r in rows}


def test_every_kind_is_present(million: tuple[Path, dict[str, EngineTruth]]) -> None:
    _, truth = million
    for t in truth.values():
        assert set(t.request_steps) == {"drafted", "skipped_for_length", "grammar_invalid", "k_zero"}
        assert 0.05 < t.request_steps["skipped_for_length"] / t.rows < 0.5


def test_corrected_metrics_equal_ground_truth(million: tuple[Path, dict[str, EngineTruth]]) -> None:
    data, truth = million
    got = by_engine(data, "SELECT * FROM acceptance")
    for engine, t in truth.items():
        row = got[engine]
        assert (row["num_drafts"], row["num_draft_tokens"], row["num_accepted_tokens"]) == (
            t.num_drafts, t.num_draft_tokens, t.num_accepted_tokens)
        assert row["acceptance_rate"] == pytest.approx(t.num_accepted_tokens / t.num_draft_tokens)
        assert row["mean_acceptance_length"] == pytest.approx(1 + t.num_accepted_tokens / t.num_drafts)


def test_vllm_compatible_metrics_equal_ground_truth(million: tuple[Path, dict[str, EngineTruth]]) -> None:
    data, truth = million
    got = by_engine(data, "SELECT * FROM acceptance_vllm")
    for engine, t in truth.items():
        row = got[engine]
        assert (row["num_drafts"], row["num_draft_tokens"], row["num_accepted_tokens"]) == (
            t.vllm_num_drafts, t.vllm_num_draft_tokens, t.vllm_num_accepted_tokens)


def test_vllm_and_corrected_differ_exactly_by_skipped_and_all_invalid(
    million: tuple[Path, dict[str, EngineTruth]],
) -> None:
    data, _ = million
    got = by_engine(data, """
        SELECT c.engine_id, v.num_drafts - c.num_drafts AS extra_drafts, s.skipped_or_all_invalid
        FROM acceptance c JOIN acceptance_vllm v USING (engine_id, model, method, num_spec_tokens)
        JOIN (SELECT engine_id,
                     count(*) FILTER (WHERE (kind = 'skipped_for_length' AND k_sched > 0)
                                         OR (kind = 'grammar_invalid' AND k_valid = 0)) AS skipped_or_all_invalid
              FROM request_steps GROUP BY engine_id) s USING (engine_id)""")
    assert len(got) == 3
    for row in got.values():
        assert row["extra_drafts"] == row["skipped_or_all_invalid"] > 0


def test_per_position_counts_equal_ground_truth(million: tuple[Path, dict[str, EngineTruth]]) -> None:
    data, truth = million
    con = connect(data)
    corrected = run_query(con, "SELECT engine_id, position, num_accepted, num_reached, num_drafts, rate_over_drafts, "
                               "rate_conditional FROM acceptance_per_position ORDER BY engine_id, position").to_pylist()
    vllm = run_query(con, "SELECT engine_id, position, num_accepted_tokens_per_pos FROM acceptance_vllm_per_position "
                          "ORDER BY engine_id, position").to_pylist()
    con.close()
    for engine, t in truth.items():
        rows = [r for r in corrected if r["engine_id"] == engine]
        assert [r["position"] for r in rows] == [0, 1, 2, 3]
        assert [r["num_accepted"] for r in rows] == t.accepted_per_pos
        assert [r["num_reached"] for r in rows] == t.reached_per_pos
        assert [r["rate_over_drafts"] for r in rows] == pytest.approx([a / t.num_drafts for a in t.accepted_per_pos])
        assert [r["rate_conditional"] for r in rows] == pytest.approx(
            [a / n for a, n in zip(t.accepted_per_pos, t.reached_per_pos, strict=True)])
        assert [r["num_accepted_tokens_per_pos"] for r in vllm if r["engine_id"] == engine] == t.vllm_accepted_per_pos


def test_outcome_shares_equal_ground_truth(million: tuple[Path, dict[str, EngineTruth]]) -> None:
    data, truth = million
    con = connect(data)
    rows = run_query(con, "SELECT engine_id, kind, k_zero_reason, request_steps, share FROM outcome_shares").to_pylist()
    con.close()
    for engine, t in truth.items():
        mine = [r for r in rows if r["engine_id"] == engine]
        kinds: dict[str, int] = {}
        for r in mine:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + r["request_steps"]
            assert r["share"] == pytest.approx(r["request_steps"] / t.rows)
        assert kinds == t.request_steps
        assert {r["k_zero_reason"]: r["request_steps"] for r in mine if r["kind"] == "k_zero"} == t.k_zero_reasons
