-- outcome_counts(t0, t1, source): outcome_histogram over a window, or over a table of shape counts.
--
-- The metric macros that aggregate outcome shapes read this, so one definition serves two inputs:
-- with source NULL, the stored request-steps over t0 <= event_time < t1 (outcome_histogram_between);
-- with source the name of a table or view holding outcome_histogram's key columns and request_steps
-- (the report's one scan, report_counts, kept as a temporary table), that table's rows re-counted
-- by shape, t0 and t1 unused. The branch not taken reads nothing: its filter is a constant false.
-- (On Spark, where there is no table of counts, queries/spark.py keeps the first branch alone.)
--
-- Example:
--   SELECT kind, sum(request_steps) AS n FROM outcome_counts(NULL, NULL, NULL) GROUP BY kind ORDER BY kind
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   is_draft, is_vllm_draft                     as in request_steps
--   request_steps                               number of request-steps with this shape (BIGINT)
CREATE OR REPLACE MACRO outcome_counts(t0, t1, source) AS TABLE
SELECT
    engine_id, model, method, num_spec_tokens, kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted,
    is_draft, is_vllm_draft, request_steps
FROM outcome_histogram_between(t0, t1)
WHERE source IS NULL
UNION ALL BY NAME
SELECT
    engine_id, model, method, num_spec_tokens, kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted,
    is_draft, is_vllm_draft, CAST(sum(request_steps) AS BIGINT) AS request_steps
FROM query_table(coalesce(source, 'outcome_histogram'))
WHERE source IS NOT NULL
GROUP BY ALL;

COMMENT ON MACRO TABLE outcome_counts IS 'Request-steps per group and outcome shape: of the stored rows over t0 <= event_time < t1, or of the table named source (the scan of a report).';
