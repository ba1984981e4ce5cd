-- request_counts_from_rollups(t0 := NULL, t1 := NULL): each request's counts over a window, from the stored rollups.
--
-- The rows of request_counts(NULL, t0, t1) (one per group and request with request-steps in
-- t0 <= event_time < t1), added up from the rows per request of raw_rollups (file_rollup: each
-- data file's counts per request and minute) for the whole minutes of the window, and from the
-- raw rows through request_counts for its partial first and last minute, as
-- report_counts_from_rollups splits a window. It is right only when every data file of the window
-- has its rollup: `specmetrics report` checks that before and after it reads; elsewhere use
-- request_counts. The tests check it equals request_counts.
--
-- Example:
--   SELECT request_id, collateral_skips, lost_draft_tokens FROM request_counts_from_rollups() ORDER BY collateral_skips DESC LIMIT 10
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   request_id                  vLLM request id (unique within an engine)
--   request_steps, skips, collateral_skips, own_skips, lost_draft_tokens, num_drafts, num_draft_tokens,
--   num_accepted_tokens, emitted_tokens          the request's counts in the window, as request_counts (BIGINT)
--   first_event, last_event     the first and last event time of the request in the window (TIMESTAMP)
CREATE OR REPLACE MACRO request_counts_from_rollups(t0 := NULL, t1 := NULL) AS TABLE
WITH parts AS (
    SELECT
        engine_id, model, method, num_spec_tokens, request_id, request_steps, skips, collateral_skips, own_skips,
        lost_draft_tokens, num_drafts, num_draft_tokens, num_accepted_tokens, emitted_tokens, first_event, last_event
    FROM raw_rollups
    WHERE request_id IS NOT NULL AND in_window(minute, dt, hour, whole_minutes_start(t0), whole_minutes_end(t1))
    UNION ALL BY NAME
    SELECT * EXCLUDE (bucket_index) FROM request_counts(NULL, first_part_start(t0), first_part_end(t0, t1))
    UNION ALL BY NAME
    SELECT * EXCLUDE (bucket_index) FROM request_counts(NULL, last_part_start(t0, t1), last_part_end(t1))
)
SELECT
    engine_id, model, method, num_spec_tokens, request_id,
    CAST(sum(request_steps) AS BIGINT) AS request_steps,
    CAST(sum(skips) AS BIGINT) AS skips,
    CAST(sum(collateral_skips) AS BIGINT) AS collateral_skips,
    CAST(sum(own_skips) AS BIGINT) AS own_skips,
    CAST(sum(lost_draft_tokens) AS BIGINT) AS lost_draft_tokens,
    CAST(sum(num_drafts) AS BIGINT) AS num_drafts,
    CAST(sum(num_draft_tokens) AS BIGINT) AS num_draft_tokens,
    CAST(sum(num_accepted_tokens) AS BIGINT) AS num_accepted_tokens,
    CAST(sum(emitted_tokens) AS BIGINT) AS emitted_tokens,
    min(first_event) AS first_event,
    max(last_event) AS last_event
FROM parts
GROUP BY engine_id, model, method, num_spec_tokens, request_id;

COMMENT ON MACRO TABLE request_counts_from_rollups IS 'request_counts over one window (t0, t1) read from the rows per request of the stored rollups (whole minutes) and the raw rows (partial first and last minute); right only when every data file of the window has its rollup.';
