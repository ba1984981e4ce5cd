"""The report computes its numbers from one rollup; on any valid set of outcomes they equal the
views' numbers, pooled."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.queries import connect, run_query
from specmetrics.reports import ReportData, Window, collect
from tests.support.outcomes import audited_outcome, vllm_counts_of


def pooled(con: Any, sql: str) -> list[dict[str, Any]]:
    return list(run_query(con, sql).to_pylist())


def approx(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: pytest.approx(v) if isinstance(v, float) else v for k, v in row.items()} for row in rows]


def check(con: Any) -> ReportData:
    data = collect(con, Window(None, None), bucket=timedelta(hours=1), context_tokens=512)
    [headline] = pooled(con, """
        SELECT sum(num_drafts) AS num_drafts, sum(vllm_num_drafts) AS vllm_num_drafts,
               sum(num_draft_tokens) AS num_draft_tokens, sum(vllm_num_draft_tokens) AS vllm_num_draft_tokens,
               sum(num_accepted_tokens) AS num_accepted_tokens,
               sum(vllm_num_accepted_tokens) AS vllm_num_accepted_tokens
        FROM acceptance_diff""")
    assert {k: data.headline[k] for k in headline} == headline
    view_groups = pooled(con, "FROM acceptance_diff ORDER BY engine_id, model, method, num_spec_tokens")
    assert [{k: g[k] for k in view_groups[0]} for g in data.groups] == approx(view_groups)
    assert [(r["bucket_start"], r["request_steps"], r["acceptance_rate"], r["vllm_acceptance_rate"])
            for r in data.timeline] == [tuple(r.values()) for r in approx(pooled(con, """
        SELECT bucket_start, sum(request_steps) AS n, sum(num_accepted_tokens) / nullif(sum(num_draft_tokens), 0) AS a,
               sum(vllm_num_accepted_tokens) / nullif(sum(vllm_num_draft_tokens), 0) AS v
        FROM acceptance_timeline(bucket := INTERVAL 1 HOUR) GROUP BY ALL ORDER BY ALL"""))]
    assert [tuple(r.values()) for r in data.positions] == [tuple(r.values()) for r in approx(pooled(con, """
        SELECT c.position, sum(c.num_accepted) / nullif(sum(c.num_drafts), 0),
               sum(c.num_accepted) / nullif(sum(c.num_reached), 0),
               sum(v.num_accepted_tokens_per_pos) / nullif(sum(v.num_drafts), 0)
        FROM acceptance_per_position c JOIN acceptance_vllm_per_position v
            USING (engine_id, model, method, num_spec_tokens, position)
        GROUP BY c.position ORDER BY c.position"""))]
    assert [tuple(r.values()) for r in data.context] == [tuple(r.values()) for r in approx(pooled(con, """
        SELECT context_start, context_end, sum(request_steps), sum(skipped) / sum(request_steps),
               sum(num_accepted_tokens) / nullif(sum(num_draft_tokens), 0),
               sum(vllm_num_accepted_tokens) / nullif(sum(vllm_num_draft_tokens), 0)
        FROM skips_by_context_between(NULL, NULL, context_tokens := 512)
        GROUP BY ALL ORDER BY context_start NULLS LAST"""))]
    assert data.configurations == approx(pooled(con, """
        SELECT model, method, num_spec_tokens, engines, verify_steps, tokens_per_verify_step,
               accepted_per_verified_slot, acceptance_rate, rank_in_model
        FROM k_comparison QUALIFY count(*) OVER (PARTITION BY model) > 1
        ORDER BY model, rank_in_model, method, num_spec_tokens"""))
    assert data.wasted == approx(pooled(con, """
        FROM wasted_verification WHERE wasted_slots > 0
        ORDER BY wasted_share DESC, engine_id, model, method, num_spec_tokens"""))
    assert data.baselines == approx(pooled(con, """
        SELECT model, method, num_spec_tokens, position, rate, vllm_rate, baseline_rate, difference, baseline_model,
               baseline_drafter
        FROM baseline_comparison"""))
    configurations = pooled(con, "SELECT DISTINCT model, method, num_spec_tokens FROM acceptance_per_position")
    assert [(r["model"], r["method"], r["num_spec_tokens"]) for r in data.measured] == \
        sorted((r["model"], r["method"], r["num_spec_tokens"]) for r in configurations if r["num_spec_tokens"])
    assert {r["k_zero_reason"]: r["request_steps"] for r in data.k_zero} == {
        r["k_zero_reason"]: r["n"] for r in pooled(con, "SELECT k_zero_reason, sum(request_steps) AS n "
                                                         "FROM k_zero_reasons GROUP BY ALL")}
    assert data.collateral == approx(pooled(con, """
        SELECT engine_id, model, method, num_spec_tokens, skips, collateral_skips, unknown_skips, collateral_share,
               lost_draft_tokens, estimated_accepted_tokens, acceptance_rate, acceptance_rate_had_drafted
        FROM collateral_skips WHERE collateral_skips + own_skips > 0
        ORDER BY collateral_skips DESC, engine_id, model, method, num_spec_tokens"""))
    assert [(r["bucket"], r["requests"]) for r in data.histogram] == [tuple(r.values()) for r in pooled(con, """
        SELECT bucket, CAST(sum(requests) AS BIGINT) FROM acceptance_histogram GROUP BY bucket ORDER BY bucket""")]
    outliers = pooled(con, "SELECT engine_id, request_id, direction FROM request_outliers "
                           "ORDER BY abs(difference) DESC, engine_id, request_id")
    assert [(r["engine_id"], r["request_id"], r["direction"]) for r in data.outliers] == \
        [tuple(r.values()) for r in outliers[:20]]
    assert all((r["outliers"], r["low_outliers"]) == (len(outliers), sum(o["direction"] == "low" for o in outliers))
               for r in data.outliers)
    assert data.audit == pooled(con, """
        SELECT r.engine_id, r.model, r.method, r.num_spec_tokens, count(*) AS request_steps,
               count(a.event_id) AS audited_request_steps, count(*) FILTER (WHERE a.differs) AS differing_request_steps
        FROM request_steps AS r LEFT JOIN vllm_audit_steps AS a
            ON r.event_id = a.event_id AND r.log_partition = a.log_partition AND r.log_offset = a.log_offset
        GROUP BY ALL ORDER BY ALL""")
    assert [(r["engine_id"], r["steps_differing"]) for r in data.drift] == [tuple(r.values()) for r in pooled(con, """
        SELECT engine_id, steps_differing FROM vllm_audit WHERE steps_differing > 0 ORDER BY ALL""")]
    assert {r["kind"]: r["request_steps"] for r in data.shares} == {
        r["kind"]: r["n"] for r in pooled(con, "SELECT kind, sum(request_steps) AS n FROM outcome_shares GROUP BY ALL")}
    return data


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(audited_outcome(), min_size=1, max_size=40))
def test_report_numbers_equal_the_views(outcomes: Any, drawn: list[dict[str, Any]]) -> None:
    rows = [outcomes.row(**d) for d in drawn]
    with tempfile.TemporaryDirectory() as tmp:
        con = connect(outcomes.write_table(Path(tmp) / "data", rows))
        try:
            data = check(con)
            # each row a step of its own: the audit finds exactly the rows given counters vLLM would not compute
            assert sum(r["differing_request_steps"] for r in data.audit) == sum(
                "vllm_num_drafts" in row and {c: row[c] for c in vllm_counts_of(row)} != vllm_counts_of(row)
                for row in rows)
            assert sum(r["audited_request_steps"] for r in data.audit) == sum("vllm_num_drafts" in r for r in rows)
        finally:
            con.close()
