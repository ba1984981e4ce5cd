-- report_counts_from_rollups(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256): report_counts from the stored rollups.
--
-- The same rows as report_counts (same columns, same sums per group, bucket and shape), read from
-- raw_rollups, the per-file rollups that `specmetrics report` builds (file_rollup's rows per outcome
-- shape, queries/rollup.py: request-steps per minute and 256-token context bucket), instead of from every raw row. The whole
-- minutes of the window come from the rollups (their dt and hour partitions pruned), the partial
-- first and last minute (bounds that are not whole minutes) from the raw rows through
-- report_counts (report_parts_from_rollups reads the pieces, this adds them up). bucket must be a
-- whole number of minutes and context_tokens a multiple of 256.
-- It is right only when every data file of the window has its rollup (a file without one is
-- missing from the whole minutes): `specmetrics report` checks that before and after it reads;
-- elsewhere use report_counts. `specmetrics verify` checks the rollups equal the raw rows, and
-- the tests check this macro equals report_counts.
--
-- Example:
--   SELECT kind, sum(request_steps) AS request_steps FROM report_counts_from_rollups(bucket := INTERVAL 1 HOUR) GROUP BY ALL
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   bucket_start                                time bucket start (TIMESTAMP, UTC)
--   context_start, context_end                  context-length bucket (INTEGER, BIGINT; NULL when unknown)
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   is_draft, is_vllm_draft                     as in request_steps
--   vllm_counts_differ                          as in audited_request_steps
--   request_steps                               request-steps in the row (BIGINT)
--   first_event, last_event                     the first and last event_time among them
CREATE OR REPLACE MACRO report_counts_from_rollups(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256) AS TABLE
SELECT
    engine_id, model, method, num_spec_tokens, bucket_start, context_start,
    CAST(context_start + CAST(context_tokens AS BIGINT) AS BIGINT) AS context_end,
    kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted,
    is_draft(kind, k_valid) AS is_draft,
    is_vllm_draft(k_sched) AS is_vllm_draft,
    vllm_counts_differ,
    CAST(sum(request_steps) AS BIGINT) AS request_steps, min(first_event) AS first_event, max(last_event) AS last_event
FROM report_parts_from_rollups(t0 := t0, t1 := t1, bucket := bucket, context_tokens := context_tokens)
GROUP BY ALL;

COMMENT ON MACRO TABLE report_counts_from_rollups IS 'report_counts read from the stored per-file rollups (whole minutes) and the raw rows (partial first and last minute); right only when every data file of the window has its rollup; bucket in whole minutes, context_tokens a multiple of 256.';
