"""The numbers of a report for one time window, from one scan of the table for the counts and one
for the counts per request (of the rollups, where they cover the window), side by side on two
connections of one database.

``report_counts`` (queries/sql/report) counts request-steps per group and outcome shape,
per time bucket and per context bucket in one pass; ``report_counts_from_rollups`` gives the same rows
from the rollups stored next to the data (queries/rollup.py), which the report uses when they
cover the window and the widths allow it. The report keeps its rows in a temporary
table and computes every number from them with the metric definitions of the views
(docs/design.md#metric-definitions), pooled the way vLLM pools: sums of counts first, ratios last. The window and widths
are bound as parameters, never pasted into the SQL. Tests check the numbers equal the views'.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import duckdb

from specmetrics.queries.catalog import run_query
from specmetrics.queries.rollup import ROLLUP_BUCKET, ROLLUP_CONTEXT_TOKENS

Row = dict[str, Any]

#: Timeline bucket widths tried in order; the first giving at most MAX_BUCKETS buckets is used. Widths under a
#: minute (which the stored rollups cannot give) only when whole minutes would give fewer than MIN_BUCKETS.
BUCKETS: tuple[timedelta, ...] = (
    timedelta(seconds=1), timedelta(seconds=5), timedelta(seconds=15), timedelta(minutes=1), timedelta(minutes=5),
    timedelta(minutes=15), timedelta(hours=1), timedelta(hours=6), timedelta(days=1), timedelta(days=7),
)
MAX_BUCKETS = 120
MIN_BUCKETS = 10
#: The most buckets a width given by the caller may give (1 s over a 10-hour window: 36,000 buckets, a 12 MB
#: HTML report whose timeline no one can read).
MAX_GIVEN_BUCKETS = 10_000

_SPAN = """
SELECT min(event_time) AS first, max(event_time) AS last
FROM request_steps_between($t0, $t1)
"""
#: The same from the rollups' pieces of the window, not added up (0.077 -> 0.033 s at 6.4M request-steps).
_STORED_SPAN = """
SELECT min(first_event) AS first, max(last_event) AS last
FROM report_parts_from_rollups(t0 := $t0, t1 := $t1)
"""
#: The one scan of a report: report_counts's rows (or report_counts_from_rollups's), kept for the queries below.
_ROLLUP = ("CREATE TEMP TABLE {table} AS "
           "FROM {macro}(t0 := $t0, t1 := $t1, bucket := $bucket, context_tokens := $context_tokens)")
#: Corrected and vLLM-compatible counts over rollup rows (the macros of queries/sql/definitions/drafts.sql).
_COUNTS = """
        num_drafts(kind, k_valid, request_steps) AS num_drafts,
        vllm_num_drafts(k_sched, request_steps) AS vllm_num_drafts,
        num_draft_tokens(kind, k_valid, request_steps) AS num_draft_tokens,
        vllm_num_draft_tokens(kind, k_sched, k_valid, request_steps) AS vllm_num_draft_tokens,
        num_accepted_tokens(kind, k_valid, accepted, request_steps) AS num_accepted_tokens,
        vllm_num_accepted_tokens(k_sched, accepted, request_steps) AS vllm_num_accepted_tokens"""
_TOKEN_RATES = """
       acceptance_rate(num_accepted_tokens, num_draft_tokens) AS acceptance_rate,
       acceptance_rate(vllm_num_accepted_tokens, vllm_num_draft_tokens) AS vllm_acceptance_rate"""
_RATES = _TOKEN_RATES + """,
       mean_acceptance_length(num_accepted_tokens, num_drafts) AS mean_acceptance_length,
       mean_acceptance_length(vllm_num_accepted_tokens, vllm_num_drafts) AS vllm_mean_acceptance_length"""
_HEADLINE = f"""
WITH totals AS (SELECT {_COUNTS} FROM {{table}})
SELECT *, {_RATES} FROM totals
"""
_SHARES = """
SELECT kind, CAST(sum(request_steps) AS BIGINT) AS request_steps,
       sum(request_steps) / sum(sum(request_steps)) OVER () AS share
FROM {table}
GROUP BY kind ORDER BY kind
"""
_TIMELINE = f"""
WITH totals AS (
    SELECT bucket_start, CAST(sum(request_steps) AS BIGINT) AS request_steps, {_COUNTS}
    FROM {{table}} GROUP BY bucket_start
)
SELECT bucket_start, request_steps, {_TOKEN_RATES}
FROM totals ORDER BY bucket_start
"""
_POSITIONS = """
SELECT
    p.position,
    rate_over_drafts(num_accepted_at(kind, k_valid, accepted, p.position, request_steps),
                     num_drafts(kind, k_valid, request_steps)) AS rate_over_drafts,
    rate_conditional(num_accepted_at(kind, k_valid, accepted, p.position, request_steps),
                     num_reached(kind, k_valid, p.position, request_steps)) AS rate_conditional,
    rate_over_drafts(vllm_num_accepted_at(k_sched, accepted, p.position, request_steps),
                     vllm_num_drafts(k_sched, request_steps)) AS vllm_rate_over_drafts
FROM {table} AS r, range(r.num_spec_tokens) AS p(position)
GROUP BY p.position ORDER BY p.position
"""
_CONTEXT = f"""
WITH totals AS (
    SELECT context_start, context_end, CAST(sum(request_steps) AS BIGINT) AS request_steps,
           num_skipped(kind, request_steps) AS skipped, {_COUNTS}
    FROM {{table}} GROUP BY context_start, context_end
)
SELECT context_start, context_end, request_steps, skip_share(skipped, request_steps) AS skip_share, {_TOKEN_RATES}
FROM totals ORDER BY context_start NULLS LAST
"""
_K_ZERO = """
SELECT k_zero_reason, CAST(sum(request_steps) AS BIGINT) AS request_steps,
       sum(request_steps) / sum(sum(request_steps)) OVER () AS share_of_k_zero
FROM {table} WHERE kind = 'k_zero'
GROUP BY k_zero_reason ORDER BY request_steps DESC, k_zero_reason
"""
_GROUPS = f"""
WITH totals AS (
    SELECT engine_id, model, method, num_spec_tokens, {_COUNTS}
    FROM {{table}}
    GROUP BY engine_id, model, method, num_spec_tokens
)
SELECT *, vllm_num_drafts - num_drafts AS extra_vllm_drafts, {_RATES},
       acceptance_rate(num_accepted_tokens, num_draft_tokens)
           - acceptance_rate(vllm_num_accepted_tokens, vllm_num_draft_tokens) AS acceptance_rate_diff,
       mean_acceptance_length(num_accepted_tokens, num_drafts)
           - mean_acceptance_length(vllm_num_accepted_tokens, vllm_num_drafts) AS mean_acceptance_length_diff
FROM totals
ORDER BY engine_id, model, method, num_spec_tokens
"""

#: Per group: its request-steps, those in steps with vLLM's own counters (checked), and those in steps where
#: the counts rebuilt from the outcomes differ from them (the verdict of the view vllm_audit_steps, which
#: the counts keep per row).
_AUDIT = """
SELECT engine_id, model, method, num_spec_tokens, CAST(sum(request_steps) AS BIGINT) AS request_steps,
       CAST(coalesce(sum(request_steps) FILTER (WHERE vllm_counts_differ IS NOT NULL), 0) AS BIGINT)
           AS audited_request_steps,
       CAST(coalesce(sum(request_steps) FILTER (WHERE vllm_counts_differ), 0) AS BIGINT) AS differing_request_steps
FROM {table}
GROUP BY engine_id, model, method, num_spec_tokens
ORDER BY engine_id, model, method, num_spec_tokens
"""
#: Where some steps differ: the view vllm_audit over the window's rows (its versions, steps and differences).
_DRIFT = """
SELECT engine_id, vllm_version, model, method, steps_compared, steps_differing, first_differing_step,
       last_differing_step, num_drafts_difference, num_draft_tokens_difference, num_accepted_tokens_difference
FROM vllm_audit_between($t0, $t1)
WHERE steps_differing > 0
ORDER BY engine_id, vllm_version, model, method
"""

#: Per model with more than one configuration (method, K): each over its engines, ranked by tokens per
#: verification step (the view k_comparison, over the report's counts).
_CONFIGURATIONS = """
SELECT model, method, num_spec_tokens, engines, verify_steps, tokens_per_verify_step, accepted_per_verified_slot,
       acceptance_rate, rank_in_model
FROM k_comparison_between(NULL, NULL, source := '{table}')
QUALIFY count(*) OVER (PARTITION BY model) > 1
ORDER BY model, rank_in_model, method, num_spec_tokens
"""

#: Per group, the draft slots the target verified and those that held no draft (the view
#: wasted_verification, over the report's counts); only groups with some.
_WASTED = """
FROM wasted_verification_between(NULL, NULL, source := '{table}')
WHERE wasted_slots > 0
ORDER BY wasted_share DESC, engine_id, model, method, num_spec_tokens
"""

#: Each configuration's per-position rates (pooled over its engines) beside the published baseline of its
#: model, method and K (the view baseline_comparison, over the report's counts): only configurations with one.
_BASELINES = """
SELECT model, method, num_spec_tokens, position, rate, vllm_rate, baseline_rate, difference, baseline_model,
       baseline_drafter
FROM baseline_comparison_between(NULL, NULL, source := '{table}')
ORDER BY model, method, num_spec_tokens, position
"""
#: The configurations that drafted (K > 0): those no baseline matches are named.
_MEASURED = "SELECT DISTINCT model, method, num_spec_tokens FROM {table} WHERE num_spec_tokens > 0 ORDER BY ALL"
_PUBLISHED = "SELECT DISTINCT model, method, num_spec_tokens, dataset, sampling, source FROM baselines ORDER BY model"

#: The engines whose context vLLM lowered to the drafter's; from the rows (rollups do not keep the
#: lengths), where Parquet statistics skip every row group without a cap.
_CONTEXT_CAPS = """
SELECT engine_id, model, vllm_version, method, max_model_len, context_cap_from, drafter_max_len, summary
FROM context_caps_between($t0, $t1) WHERE capped
ORDER BY engine_id, model, vllm_version, method, max_model_len
"""

#: The steps the plugin saw only through vLLM's stat logger (no outcome, no rollup): from the rows, where
#: Parquet statistics skip every row group without one ('vllm_only' sorts after every other kind).
_VLLM_ONLY = """
SELECT engine_id, vllm_version, model, method, vllm_only, steps, num_drafts, num_draft_tokens, num_accepted_tokens,
       acceptance_rate, mean_acceptance_length
FROM vllm_only_steps_between($t0, $t1)
ORDER BY engine_id, vllm_version, model, method, vllm_only
"""

#: The per-request sections read each request's counts over the window once (request_counts; from
#: the rollups' rows per request when they cover the window), kept in a temporary table that the
#: three queries below hand to the views collateral_skips, acceptance_histogram and request_outliers
#: (their source parameter). The tokens a request emitted and its first and last event, which no
#: section shows, are left NULL rather than added up: a seventh of the table's time at 8M requests.
_UNSHOWN = ("REPLACE (CAST(NULL AS BIGINT) AS emitted_tokens, CAST(NULL AS TIMESTAMP) AS first_event, "
            "CAST(NULL AS TIMESTAMP) AS last_event)")
_REQUESTS = f"""
CREATE TEMP TABLE {{requests}} AS
SELECT * EXCLUDE (bucket_index) {_UNSHOWN} FROM request_counts(NULL, $t0, $t1)
"""
_STORED_REQUESTS = f"""
CREATE TEMP TABLE {{requests}} AS
SELECT * {_UNSHOWN} FROM request_counts_from_rollups(t0 := $t0, t1 := $t1)
"""
#: Per group with skips of known request lengths, the skips told apart by each request's own length.
_COLLATERAL = """
SELECT engine_id, model, method, num_spec_tokens, skips, collateral_skips, unknown_skips, collateral_share,
       lost_draft_tokens, estimated_accepted_tokens, acceptance_rate, acceptance_rate_had_drafted
FROM collateral_skips_between(NULL, NULL, source := '{requests}')
WHERE collateral_skips + own_skips > 0
ORDER BY collateral_skips DESC, engine_id, model, method, num_spec_tokens
"""
#: Requests by their own corrected acceptance rate, in HISTOGRAM_BUCKETS buckets, pooled over the groups
#: (no row when no request has a draft token).
_HISTOGRAM = """
SELECT bucket, lower_rate, upper_rate, CAST(sum(requests) AS BIGINT) AS requests,
       sum(requests) / sum(sum(requests)) OVER () AS share
FROM acceptance_histogram_between(NULL, NULL, buckets := $buckets, source := '{requests}')
GROUP BY bucket, lower_rate, upper_rate
ORDER BY bucket
"""
#: The requests farthest from their group's acceptance (the view request_outliers), at most
#: OUTLIER_ROWS, with how many there are in all and how many are low.
_OUTLIERS = """
-- The counts over all of them apart from the listed few: as windows over every outlier they took
-- 0.5 s more (62k outliers of 8M requests).
WITH outliers AS MATERIALIZED (
    FROM request_outliers_between(NULL, NULL, margin := $margin, min_drafts := $min_drafts, source := '{requests}')
),
counts AS (
    SELECT CAST(count(*) AS BIGINT) AS outliers,
           CAST(count(*) FILTER (WHERE direction = 'low') AS BIGINT) AS low_outliers
    FROM outliers
),
listed AS (
    FROM outliers
    ORDER BY abs(difference) DESC, engine_id, request_id
    LIMIT $limit
)
SELECT engine_id, request_id, direction, acceptance_rate, group_acceptance_rate, difference, num_drafts,
       request_steps, outliers, low_outliers
FROM listed
CROSS JOIN counts
ORDER BY abs(difference) DESC, engine_id, request_id
"""
#: The report's thresholds (the view request_outliers' defaults), and acceptance_histogram's buckets.
OUTLIER_MARGIN, OUTLIER_MIN_DRAFTS = 0.3, 8
HISTOGRAM_BUCKETS = 10
#: The outliers a report lists.
OUTLIER_ROWS = 20


@dataclass(frozen=True)
class Window:
    """The report's time window: since <= event_time < until (UTC); None leaves an end open."""

    since: datetime | None
    until: datetime | None

    def describe(self) -> str:
        def show(t: datetime | None, open_end: str) -> str:
            return open_end if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")

        return f"{show(self.since, 'the first event')} to {show(self.until, 'the last event')}"


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows, as plain rows (see the queries above for the columns)."""

    window: Window
    request_steps: int
    first_event: datetime | None
    last_event: datetime | None
    headline: Row
    shares: list[Row]
    bucket: timedelta
    timeline: list[Row]
    positions: list[Row]
    context: list[Row]
    k_zero: list[Row]
    groups: list[Row]
    audit: list[Row]
    drift: list[Row]
    context_caps: list[Row]
    configurations: list[Row]
    baselines: list[Row]
    measured: list[Row]
    published: list[Row]
    wasted: list[Row]
    collateral: list[Row]
    histogram: list[Row]
    outliers: list[Row]
    vllm_only: list[Row]

    @property
    def empty(self) -> bool:
        """Nothing to show: no request-step, and no step with vLLM's numbers only."""
        return self.request_steps == 0 and not self.vllm_only


def collect(con: duckdb.DuckDBPyConnection, window: Window, *, bucket: timedelta | None = None,
            context_tokens: int = 256, stored_rollups: bool = False, requests: bool = True) -> ReportData:
    """Run the report's queries for ``window``: one scan for the time span, one for
    ``report_counts`` (kept in a temporary table), then small queries over that table.
    ``bucket`` None picks a timeline width that gives at most :data:`MAX_BUCKETS` buckets; a
    ``bucket`` that gives more than :data:`MAX_GIVEN_BUCKETS` is a ``ValueError``.
    ``stored_rollups``: the table's rollups cover the window (:func:`queries.rollup.rollups_cover`),
    so the scans read them instead of the raw rows, where the widths allow it (the sections about
    single requests at any width). ``requests``: also the sections about single requests."""
    stored = stored_rollups and context_tokens % ROLLUP_CONTEXT_TOKENS == 0 and \
        (bucket is None or bucket % ROLLUP_BUCKET == timedelta(0))
    span = {"t0": window.since, "t1": window.until}
    [first_last] = run_query(con, _STORED_SPAN if stored else _SPAN, span).to_pylist()
    chosen = bucket or _pick_bucket(first_last["first"], first_last["last"])
    if bucket and first_last["first"] is not None:
        buckets = (first_last["last"] - first_last["first"]) // bucket + 1
        if buckets > MAX_GIVEN_BUCKETS:
            raise ValueError(f"a bucket of {bucket_text(bucket)} gives {buckets:,} buckets from "
                             f"{first_last['first']} to {first_last['last']} (at most {MAX_GIVEN_BUCKETS:,}): choose "
                             "a wider bucket or a shorter window")
    stored = stored and chosen % ROLLUP_BUCKET == timedelta(0)  # a short span: seconds, from the raw rows
    table = f"report_counts_{uuid.uuid4().hex}"
    macro = "report_counts_from_rollups" if stored else "report_counts"
    with _per_request_sections(con, span, requests, stored_rollups) as per_request:
        con.execute(_ROLLUP.format(table=table, macro=macro),
                    {**span, "bucket": chosen, "context_tokens": context_tokens})
        try:
            def rows(sql: str) -> list[Row]:
                return list(run_query(con, sql.format(table=table)).to_pylist())

            shares = rows(_SHARES)
            audit = rows(_AUDIT)
            return ReportData(
                window=window,
                request_steps=sum(r["request_steps"] for r in shares),
                first_event=first_last["first"],
                last_event=first_last["last"],
                headline=rows(_HEADLINE)[0],
                shares=shares,
                bucket=chosen,
                timeline=rows(_TIMELINE),
                positions=rows(_POSITIONS),
                context=rows(_CONTEXT),
                k_zero=rows(_K_ZERO),
                groups=rows(_GROUPS),
                audit=audit,
                drift=list(run_query(con, _DRIFT, span).to_pylist())
                if any(row["differing_request_steps"] for row in audit) else [],
                context_caps=list(run_query(con, _CONTEXT_CAPS, span).to_pylist()),
                vllm_only=list(run_query(con, _VLLM_ONLY, span).to_pylist()),
                configurations=rows(_CONFIGURATIONS),
                baselines=rows(_BASELINES),
                measured=rows(_MEASURED),
                published=rows(_PUBLISHED),
                wasted=rows(_WASTED),
                **per_request(),
            )
        finally:
            con.execute(f"DROP TABLE {table}")


@contextmanager
def _per_request_sections(con: duckdb.DuckDBPyConnection, span: dict[str, Any], wanted: bool,
                          stored_rollups: bool) -> Iterator[Callable[[], dict[str, list[Row]]]]:
    """The sections about single requests (none unless ``wanted``), as a function the caller calls
    once the rest is done. From the rollups they run on a cursor of their own, side by side with the
    rest: most of the other queries take milliseconds and leave a core idle. Over the raw rows both
    parts scan every row, so they run after it (side by side, 9 % slower and 1.1 GB more at 100M
    request-steps)."""
    if not wanted:
        yield lambda: {"collateral": [], "histogram": [], "outliers": []}
    elif not stored_rollups:
        yield lambda: _per_request(con.cursor(), span, False)
    else:
        with ThreadPoolExecutor(1) as pool:
            yield pool.submit(_per_request, con.cursor(), span, True).result


def _per_request(con: duckdb.DuckDBPyConnection, span: dict[str, Any], stored: bool) -> dict[str, list[Row]]:
    """The sections about single requests, from one scan of the window's rows per request in the
    rollups (``stored``) or of its raw rows, on ``con`` (a cursor it closes)."""
    requests = f"report_requests_{uuid.uuid4().hex}"  # a temporary table: the cursor's own
    try:
        con.execute((_STORED_REQUESTS if stored else _REQUESTS).format(requests=requests), span)

        def rows(sql: str, params: dict[str, Any]) -> list[Row]:
            return list(run_query(con, sql.format(requests=requests), params).to_pylist())

        return {
            "collateral": rows(_COLLATERAL, {}),
            "histogram": rows(_HISTOGRAM, {"buckets": HISTOGRAM_BUCKETS}),
            "outliers": rows(_OUTLIERS, {"margin": OUTLIER_MARGIN, "min_drafts": OUTLIER_MIN_DRAFTS,
                                         "limit": OUTLIER_ROWS}),
        }
    finally:
        con.close()


def bucket_text(bucket: timedelta) -> str:
    """A timeline bucket's width as the report names it: ``15 min``, ``1 h``, ``5 s``."""
    seconds = int(bucket.total_seconds())
    for unit, name in ((86400, "day"), (3600, "h"), (60, "min")):
        if seconds % unit == 0:
            return f"{seconds // unit} {name}"
    return f"{seconds} s"


def _pick_bucket(first: datetime | None, last: datetime | None) -> timedelta:
    if first is None or last is None:
        return BUCKETS[0]
    span = last - first
    short = span < MIN_BUCKETS * ROLLUP_BUCKET
    return next((b for b in BUCKETS if (short or b >= ROLLUP_BUCKET) and span / b < MAX_BUCKETS), BUCKETS[-1])
