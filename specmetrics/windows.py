"""Corrected and vLLM-compatible numbers of one time window (e.g. one demo scenario).

The window's bounds are bound parameters (seconds since the epoch), never pasted into SQL; the
counts are the macros every view uses (queries/sql/definitions/drafts.sql), over
request_steps_between.
"""

from __future__ import annotations

from typing import Any

import duckdb

from specmetrics.queries import run_query

#: The request-steps from the first instant to the last, both included (event times are whole
#: microseconds, so the open end is one microsecond past the last).
_BOUNDS = "make_timestamp(CAST(? * 1e6 AS BIGINT)), make_timestamp(CAST(? * 1e6 AS BIGINT) + 1)"
_WINDOW = f"request_steps_between({_BOUNDS})"
#: The skips of a window told apart by each request's own length (the view collateral_skips).
COLLATERAL_COLUMNS = ("skips", "collateral_skips", "collateral_share", "lost_draft_tokens", "estimated_accepted_tokens")
COLLATERAL = f"""
SELECT CAST(coalesce(sum(skips), 0) AS BIGINT) AS skips,
       CAST(coalesce(sum(collateral_skips), 0) AS BIGINT) AS collateral_skips,
       skip_share(sum(collateral_skips), sum(skips)) AS collateral_share,
       CAST(coalesce(sum(lost_draft_tokens), 0) AS BIGINT) AS lost_draft_tokens,
       sum(estimated_accepted_tokens) AS estimated_accepted_tokens
FROM collateral_skips_between({_BOUNDS})"""

TOTALS = f"""
SELECT vllm_num_drafts(k_sched) AS vllm_num_drafts,
       vllm_num_draft_tokens(kind, k_sched, k_valid) AS vllm_num_draft_tokens,
       vllm_num_accepted_tokens(k_sched, accepted) AS vllm_num_accepted_tokens,
       num_drafts(kind, k_valid) AS num_drafts,
       num_draft_tokens(kind, k_valid) AS num_draft_tokens,
       num_accepted_tokens(kind, k_valid, accepted) AS num_accepted_tokens,
       count(*) AS request_steps, coalesce(sum(k_invalid), 0) AS k_invalid,
       acceptance_rate(num_accepted_tokens(kind, k_valid, accepted), num_draft_tokens(kind, k_valid))
           AS acceptance_rate,
       mean_acceptance_length(num_accepted_tokens(kind, k_valid, accepted), num_drafts(kind, k_valid))
           AS mean_acceptance_length,
       skip_share(num_skipped(kind), count(*)) AS skip_share,
       count(*) FILTER (WHERE kind = 'k_zero') / nullif(count(*), 0) AS k_zero_share
FROM {_WINDOW}"""

#: Acceptance rate and mean acceptance length of counts given as parameters (vLLM's own counters).
RATIOS = "SELECT acceptance_rate(CAST(? AS BIGINT), CAST(? AS BIGINT)) AS acceptance_rate, " \
    "mean_acceptance_length(CAST(? AS BIGINT), CAST(? AS BIGINT)) AS mean_acceptance_length"

VLLM_PER_POSITION = f"""
SELECT p AS position, vllm_num_accepted_at(k_sched, accepted, p) AS n
FROM {_WINDOW}, range(CAST(? AS BIGINT)) t(p) GROUP BY p ORDER BY p"""

KINDS = f"""
SELECT kind || coalesce(':' || k_zero_reason, '') AS kind, count(*) AS n
FROM {_WINDOW} GROUP BY ALL ORDER BY 1"""


def window_metrics(con: duckdb.DuckDBPyConnection, started: float, finished: float, positions: int) -> dict[str, Any]:
    """Totals (``vllm_*`` as vLLM counts, plain names corrected) with the corrected acceptance rate,
    mean acceptance length and the skip and K = 0 shares (None where undefined), vLLM's accepted count
    per position, and request-steps per kind (``k_zero:<k_zero_reason>``) between two instants."""
    window = [started, finished]
    totals: dict[str, Any] = {k: v if isinstance(v, float) or v is None else int(v)
                              for k, v in run_query(con, TOTALS, window).to_pylist()[0].items()}
    per_pos = run_query(con, VLLM_PER_POSITION, [*window, positions]).to_pylist()
    kinds = run_query(con, KINDS, window).to_pylist()
    return {**totals, "vllm_per_pos": [int(r["n"]) for r in per_pos], "kinds": {r["kind"]: int(r["n"]) for r in kinds}}


def window_collateral(con: duckdb.DuckDBPyConnection, started: float, finished: float) -> dict[str, Any]:
    """:data:`COLLATERAL_COLUMNS` between two instants, over every group there."""
    row: dict[str, Any] = run_query(con, COLLATERAL, [started, finished]).to_pylist()[0]
    return row


def reproduces(got: dict[str, Any], vllm: dict[str, Any]) -> bool:
    """Whether :func:`window_metrics`' vLLM-compatible numbers equal vLLM's own counters
    (``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``, ``num_accepted_tokens_per_pos``)."""
    return (got["vllm_num_drafts"], got["vllm_num_draft_tokens"], got["vllm_num_accepted_tokens"],
            got["vllm_per_pos"]) == (vllm["num_drafts"], vllm["num_draft_tokens"], vllm["num_accepted_tokens"],
                                     vllm["num_accepted_tokens_per_pos"])


def ratios(con: duckdb.DuckDBPyConnection, num_drafts: int, num_draft_tokens: int,
           num_accepted_tokens: int) -> tuple[float | None, float | None]:
    """(acceptance rate, mean acceptance length) of counts, by the views' macros; None where
    undefined (no drafts)."""
    counts = [num_accepted_tokens, num_draft_tokens, num_accepted_tokens, num_drafts]
    row = run_query(con, RATIOS, counts).to_pylist()[0]
    return row["acceptance_rate"], row["mean_acceptance_length"]
