"""The time dimension and the per-request and per-context views, on a small timed tree."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import duckdb
import pytest

from specmetrics.queries import run_query

T = datetime(2025, 1, 1, 10, 0)
DIMS = {"engine_id": "a/dp0", "model": "tiny-llama", "method": "draft_model", "num_spec_tokens": 3}


def at(minute: int, second: int = 0, hour: int = 10) -> datetime:
    return T.replace(hour=hour, minute=minute, second=second)


@pytest.fixture
def con(connect_rows: Any, outcomes: Any) -> Any:
    o = outcomes
    return connect_rows([
        o.drafted(3, 3, request_id="r1", event_time=at(0, 10), batch_max_seq_len=100),
        o.drafted(3, 1, request_id="r1", event_time=at(0, 50), batch_max_seq_len=300),
        o.drafted(1, 0, request_id="r2", event_time=at(1, 5), batch_max_seq_len=300),
        o.skipped(3, request_id="r2", event_time=at(1, 30), batch_max_seq_len=600),
        o.skipped(3, request_id="r3", event_time=at(2, 0), batch_max_seq_len=700),
        o.skipped(3, request_id="r4", event_time=at(2, 30), batch_max_seq_len=900),
        o.k_zero("no_proposal", request_id="r5", event_time=at(3), batch_max_seq_len=None),
        o.drafted(2, 2, request_id="r3", event_time=at(30, hour=11), batch_max_seq_len=200),  # another partition
    ])


def query(con: Any, sql: str, params: Any = None) -> list[dict[str, Any]]:
    return list(run_query(con, sql, params).to_pylist())


def bucket(start: datetime, end: datetime, steps: int, corrected: tuple[Any, ...], vllm: tuple[Any, ...]
           ) -> dict[str, Any]:
    """A timeline row: (drafts, draft tokens, accepted, rate, mean length) under both definitions."""
    names = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "acceptance_rate", "mean_acceptance_length")
    return {"bucket_start": start, "bucket_end": end, **DIMS, "request_steps": steps,
            **{n: pytest.approx(v) if isinstance(v, float) else v for n, v in zip(names, corrected, strict=True)},
            **{f"vllm_{n}": pytest.approx(v) if isinstance(v, float) else v for n, v in zip(names, vllm, strict=True)}}


def test_acceptance_timeline_default_one_minute(con: Any) -> None:
    assert query(con, "FROM acceptance_timeline()") == [
        bucket(at(0), at(1), 2, (2, 6, 4, 4 / 6, 3.0), (2, 6, 4, 4 / 6, 3.0)),
        bucket(at(1), at(2), 2, (1, 1, 0, 0.0, 1.0), (2, 4, 0, 0.0, 1.0)),
        bucket(at(2), at(3), 2, (0, 0, 0, None, None), (2, 6, 0, 0.0, 1.0)),
        bucket(at(3), at(4), 1, (0, 0, 0, None, None), (0, 0, 0, None, None)),
        bucket(at(30, hour=11), at(31, hour=11), 1, (1, 2, 2, 1.0, 3.0), (1, 2, 2, 1.0, 3.0)),
    ]


def test_acceptance_timeline_bucket_width_and_window_are_arguments(con: Any) -> None:
    assert query(con, "FROM acceptance_timeline(bucket := INTERVAL 5 MINUTE)") == [
        bucket(at(0), at(5), 7, (3, 7, 4, 4 / 7, 1 + 4 / 3), (6, 16, 4, 0.25, 1 + 4 / 6)),
        bucket(at(30, hour=11), at(35, hour=11), 1, (1, 2, 2, 1.0, 3.0), (1, 2, 2, 1.0, 3.0)),
    ]
    bound = query(con, "FROM acceptance_timeline(bucket := ?, t0 := ?, t1 := ?)",
                  ["1 hour", "2025-01-01 10:01:00", "2025-01-01 10:02:00"])
    assert bound == [bucket(at(0), at(0, hour=11), 2, (1, 1, 0, 0.0, 1.0), (2, 4, 0, 0.0, 1.0))]
    with pytest.raises(duckdb.Error, match="bucket must be a positive interval"):
        query(con, "FROM acceptance_timeline(bucket := INTERVAL 0 MINUTE)")


def test_between_macros_keep_t0_and_drop_t1(con: Any) -> None:
    window = ["2025-01-01 10:01:05", "2025-01-01 11:30:00"]  # from the third row up to, not with, the last
    assert query(con, "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM acceptance_between(?, ?)",
                 window) == [{"num_drafts": 1, "num_draft_tokens": 1, "num_accepted_tokens": 0}]
    assert query(con, "SELECT num_drafts, num_draft_tokens FROM acceptance_vllm_between($1, $2)", window) == [
        {"num_drafts": 4, "num_draft_tokens": 10}]
    assert query(con, "SELECT count(*) AS n FROM request_steps_between(?, NULL)", window[:1]) == [{"n": 6}]
    assert query(con, "SELECT count(*) AS n FROM request_steps_between(NULL, ?)", window[1:]) == [{"n": 7}]
    assert query(con, "SELECT count(*) AS n FROM request_steps_between(?, ?)", window[::-1]) == [{"n": 0}]
    # every windowed macro over all time equals its view
    for view in ("acceptance_diff", "acceptance_per_request", "skips_by_context", "k_zero_reasons", "grammar_invalid",
                 "outcome_shares", "acceptance_per_position", "acceptance_vllm_per_position"):
        assert query(con, f"FROM {view}_between(NULL, NULL) ORDER BY ALL") == query(con, f"FROM {view} ORDER BY ALL")


def test_bounds_with_an_offset_are_converted_to_utc(con: Any) -> None:
    naive = query(con, "SELECT count(*) AS n FROM request_steps_between(?, ?)", ["2025-01-01 10:01:05", None])
    assert naive == [{"n": 6}]
    for bound in ("2025-01-01T12:01:05+02:00", datetime(2025, 1, 1, 5, 1, 5, tzinfo=timezone(timedelta(hours=-5)))):
        assert query(con, "SELECT count(*) AS n FROM request_steps_between(?, NULL)", [bound]) == naive, bound


def test_acceptance_per_request_next_to_pooled(con: Any) -> None:
    # corrected: r1 2 drafts 4 accepted of 6, r2 1 draft 0 of 1, r3 1 draft 2 of 2, r4 and r5 none
    # vLLM: r1 as corrected, r2 2 drafts 0, r3 2 drafts 2, r4 1 draft 0, r5 none
    assert query(con, "FROM acceptance_per_request") == [{
        **DIMS, "num_requests": 5, "num_requests_with_drafts": 3,
        "pooled_mean_acceptance_length": pytest.approx(2.5),
        "per_request_mean_acceptance_length": pytest.approx((3 + 1 + 3) / 3),
        "pooled_acceptance_rate": pytest.approx(6 / 9),
        "per_request_acceptance_rate": pytest.approx((4 / 6 + 0 + 1) / 3),
        "vllm_pooled_mean_acceptance_length": pytest.approx(1 + 6 / 7),
        "vllm_per_request_mean_acceptance_length": pytest.approx((3 + 1 + 2 + 1) / 4),
    }]
    per_request = query(con, "SELECT request_id, request_steps, num_drafts, vllm_num_drafts FROM request_acceptance "
                             "ORDER BY request_id")
    assert [tuple(r.values()) for r in per_request] == [
        ("r1", 2, 2, 2), ("r2", 2, 1, 2), ("r3", 2, 1, 2), ("r4", 1, 0, 1), ("r5", 1, 0, 0)]


def test_skips_by_context(con: Any) -> None:  # one request per step here
    def ctx(start: int | None, end: int | None, steps: int, skipped: int, drafts: int, tokens: tuple[int, int],
            vllm_tokens: tuple[int, int]) -> dict[str, Any]:
        """tokens: (draft tokens, accepted tokens)."""
        return {**DIMS, "context_start": start, "context_end": end, "request_steps": steps, "skipped": skipped,
                "skip_share": pytest.approx(skipped / steps), "steps": steps, "skipped_steps": skipped,
                "step_skip_share": pytest.approx(skipped / steps), "num_drafts": drafts,
                "num_draft_tokens": tokens[0], "num_accepted_tokens": tokens[1],
                "acceptance_rate": pytest.approx(tokens[1] / tokens[0]) if tokens[0] else None,
                "vllm_num_draft_tokens": vllm_tokens[0], "vllm_num_accepted_tokens": vllm_tokens[1],
                "vllm_acceptance_rate": pytest.approx(vllm_tokens[1] / vllm_tokens[0]) if vllm_tokens[0] else None}

    assert query(con, "FROM skips_by_context") == [
        ctx(0, 256, 2, 0, 2, (5, 5), (5, 5)),
        ctx(256, 512, 2, 0, 2, (4, 1), (4, 1)),
        ctx(512, 768, 2, 2, 0, (0, 0), (6, 0)),  # the drafter's limit: vLLM says 0 %, nothing was drafted
        ctx(768, 1024, 1, 1, 0, (0, 0), (3, 0)),
        ctx(None, None, 1, 0, 0, (0, 0), (0, 0)),  # no batch_max_seq_len
    ]
    assert query(con, "FROM skips_by_context_between(NULL, NULL, context_tokens := 512) ORDER BY context_start") == [
        ctx(0, 512, 4, 0, 4, (9, 6), (9, 6)), ctx(512, 1024, 3, 3, 0, (0, 0), (9, 0)),
        ctx(None, None, 1, 0, 0, (0, 0), (0, 0))]


def test_skip_share_over_steps_counts_a_batch_once(connect_rows: Any, outcomes: Any) -> None:
    o = outcomes
    con = connect_rows([
        o.skipped(3, request_id="r1", event_id="s1", event_time=at(0), batch_max_seq_len=600),
        o.skipped(3, request_id="r2", event_id="s1", event_time=at(0), batch_max_seq_len=600),
        o.drafted(3, 3, request_id="r1", event_id="s2", event_time=at(1), batch_max_seq_len=650),
    ])
    assert query(con, "SELECT context_start, request_steps, skipped, skip_share, steps, skipped_steps, "
                      "step_skip_share FROM skips_by_context") == [
        {"context_start": 512, "request_steps": 3, "skipped": 2, "skip_share": pytest.approx(2 / 3), "steps": 2,
         "skipped_steps": 1, "step_skip_share": 0.5}]
