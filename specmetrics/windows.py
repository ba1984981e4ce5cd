"""Corrected and vLLM-compatible numbers of one time window (e.g. one demo story).

The window's bounds are bound parameters (seconds since the epoch), never pasted into SQL.
"""

from __future__ import annotations

from typing import Any

import duckdb

from queries import run_query

_WINDOW = "event_time BETWEEN make_timestamp(CAST(? * 1e6 AS BIGINT)) AND make_timestamp(CAST(? * 1e6 AS BIGINT))"

TOTALS = f"""
SELECT count(*) FILTER (WHERE is_vllm_draft) AS vllm_num_drafts,
       coalesce(sum(k_valid) FILTER (WHERE is_vllm_draft), 0) AS vllm_num_draft_tokens,
       coalesce(sum(accepted) FILTER (WHERE is_vllm_draft), 0) AS vllm_num_accepted_tokens,
       count(*) FILTER (WHERE is_draft) AS num_drafts,
       coalesce(sum(k_valid) FILTER (WHERE is_draft), 0) AS num_draft_tokens,
       coalesce(sum(accepted) FILTER (WHERE is_draft), 0) AS num_accepted_tokens,
       count(*) AS request_steps, coalesce(sum(k_invalid), 0) AS k_invalid
FROM request_steps WHERE {_WINDOW}"""

VLLM_PER_POSITION = f"""
SELECT p AS position, count(*) FILTER (WHERE is_vllm_draft AND accepted > p) AS n
FROM request_steps, range(CAST(? AS BIGINT)) t(p) WHERE {_WINDOW} GROUP BY p ORDER BY p"""

KINDS = f"""
SELECT kind || coalesce(':' || k_zero_reason, '') AS kind, count(*) AS n
FROM request_steps WHERE {_WINDOW} GROUP BY ALL ORDER BY 1"""


def window_metrics(con: duckdb.DuckDBPyConnection, started: float, finished: float, positions: int) -> dict[str, Any]:
    """Totals (``vllm_*`` as vLLM counts, plain names corrected), vLLM's accepted count per
    position, and request-steps per kind (``k_zero:<reason>``) between two instants."""
    window = [started, finished]
    totals: dict[str, Any] = {k: int(v) for k, v in run_query(con, TOTALS, window).to_pylist()[0].items()}
    per_pos = run_query(con, VLLM_PER_POSITION, [positions, *window]).to_pylist()
    kinds = run_query(con, KINDS, window).to_pylist()
    return {**totals, "vllm_per_pos": [int(r["n"]) for r in per_pos], "kinds": {r["kind"]: int(r["n"]) for r in kinds}}


def reproduces(got: dict[str, Any], vllm: dict[str, Any]) -> bool:
    """Whether :func:`window_metrics`' vLLM-compatible numbers equal vLLM's own counters
    (``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``, ``num_accepted_tokens_per_pos``)."""
    return (got["vllm_num_drafts"], got["vllm_num_draft_tokens"], got["vllm_num_accepted_tokens"],
            got["vllm_per_pos"]) == (vllm["num_drafts"], vllm["num_draft_tokens"], vllm["num_accepted_tokens"],
                                     vllm["num_accepted_tokens_per_pos"])


def ratios(num_drafts: int, num_draft_tokens: int, num_accepted_tokens: int) -> tuple[float | None, float | None]:
    """(acceptance rate, mean acceptance length), None where undefined (no drafts)."""
    rate = num_accepted_tokens / num_draft_tokens if num_draft_tokens else None
    mal = 1 + num_accepted_tokens / num_drafts if num_drafts else None
    return rate, mal
