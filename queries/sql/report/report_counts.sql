-- report_counts(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256): every count a report needs, in one scan.
--
-- A table macro for `specmetrics report`, which stores its result once and computes all of its
-- numbers from it, so a report reads the Parquet tree once however many charts it has: request-
-- steps over t0 <= event_time < t1 counted per group, time bucket (as in acceptance_timeline),
-- context-length bucket (as in skips_by_context), outcome shape (as in outcome_histogram) and the
-- audit verdict of the request-step's step (audited_request_steps).
-- Each dimension rolls up by summing request_steps over the others. The report's numbers are
-- checked equal to the views' in the tests.
--
-- Example:
--   SELECT bucket_start, sum(request_steps) AS request_steps FROM report_counts(bucket := INTERVAL 1 HOUR) GROUP BY ALL
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   bucket_start                                time bucket start (TIMESTAMP, UTC)
--   context_start, context_end                  context-length (batch_max_seq_len) bucket (INTEGER, BIGINT; NULL when unknown)
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   is_draft, is_vllm_draft                     as in request_steps
--   vllm_counts_differ                          as in audited_request_steps
--   request_steps                               request-steps in the row (BIGINT)
--   first_event, last_event                     the first and last event_time among them
CREATE OR REPLACE MACRO report_counts(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256) AS TABLE
WITH rolled AS (
    -- The widths are constants of the query (no join with a table of them): the bucketing is
    -- then plain integer arithmetic per row.
    SELECT
        engine_id, model, method, num_spec_tokens,
        epoch_us(event_time) // bucket_us(bucket, 'report_counts') AS bucket_index,
        batch_max_seq_len // CASE WHEN CAST(context_tokens AS INTEGER) > 0 THEN CAST(context_tokens AS INTEGER)
                                  ELSE error('report_counts: context_tokens must be positive') END AS context_index,
        kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted, vllm_counts_differ,
        CAST(count(*) AS BIGINT) AS request_steps,
        min(event_time) AS first_event,
        max(event_time) AS last_event
    FROM audited_request_steps(t0, t1)
    GROUP BY ALL
)
SELECT
    engine_id, model, method, num_spec_tokens,
    make_timestamp(bucket_index * epoch_us(CAST(bucket AS INTERVAL))) AS bucket_start,
    CAST(context_index * CAST(context_tokens AS INTEGER) AS INTEGER) AS context_start,
    CAST((context_index + 1) * CAST(context_tokens AS BIGINT) AS BIGINT) AS context_end,
    kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted,
    -- request_steps' is_draft and is_vllm_draft, computed on the rolled-up rows (cheaper than
    -- grouping by them); the tests check the report's numbers equal the views'
    is_draft(kind, k_valid) AS is_draft,
    is_vllm_draft(k_sched) AS is_vllm_draft,
    vllm_counts_differ, request_steps, first_event, last_event
FROM rolled;

COMMENT ON MACRO TABLE report_counts IS 'Request-steps counted per group, time bucket, context bucket and outcome shape, in one scan: every count a report needs (t0, t1, bucket, context_tokens).';
