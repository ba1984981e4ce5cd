-- report_rollup(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256): every count a report needs, in one scan.
--
-- A table macro for `specmetrics report`, which stores its result once and computes all of its
-- numbers from it, so a report reads the Parquet tree once however many charts it has. Three
-- grouping sets of request_steps over t0 <= event_time < t1, told apart by `grain`:
--   'shape'    per group and outcome shape (the rows of outcome_histogram): totals, per-position
--              counts, outcome kinds, K = 0 reasons, the per-group table;
--   'time'     per group, time bucket (as in acceptance_timeline) and draft counts;
--   'context'  per group, context bucket (as in skips_by_context) and kind and draft counts.
-- Columns a grain does not group by are NULL in its rows. The report's numbers are checked equal
-- to the views' in the tests.
--
-- Example:
--   SELECT grain, count(*) AS rows, sum(request_steps) AS request_steps FROM report_rollup() GROUP BY grain
--
-- Columns:
--   grain                                       'shape', 'time' or 'context'
--   engine_id, model, method, num_spec_tokens   the group
--   bucket_start                                time bucket start ('time' rows; TIMESTAMP)
--   context_start, context_end                  context-length bucket ('context' rows; INTEGER)
--   kind, k_zero_reason, k_sched, k_invalid     outcome shape ('shape' rows; kind also in 'context' rows)
--   k_valid, accepted, is_draft, is_vllm_draft  outcome counts and flags (every grain)
--   request_steps                               request-steps in the row (BIGINT)
--   first_event, last_event                     earliest and latest event_time in the row (TIMESTAMP)
CREATE OR REPLACE MACRO report_rollup(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256) AS TABLE
WITH widths AS (
    SELECT CASE WHEN epoch_us(CAST(bucket AS INTERVAL)) > 0 THEN epoch_us(CAST(bucket AS INTERVAL))
                ELSE error('report_rollup: bucket must be a positive interval') END AS bucket_us,
           CASE WHEN CAST(context_tokens AS INTEGER) > 0 THEN CAST(context_tokens AS INTEGER)
                ELSE error('report_rollup: context_tokens must be positive') END AS context_width
),
keyed AS (
    SELECT s.*, epoch_us(s.event_time) // w.bucket_us AS bucket_index, s.batch_max_seq_len // w.context_width AS context_index
    FROM request_steps_between(t0, t1) AS s, widths AS w
),
rolled AS (
    SELECT
        CASE WHEN GROUPING(kind, k_zero_reason, k_sched, k_invalid) = 0 THEN 'shape'
             WHEN GROUPING(bucket_index) = 0 THEN 'time' ELSE 'context' END AS grain,
        engine_id, model, method, num_spec_tokens, bucket_index, context_index,
        kind, k_zero_reason, k_sched, k_invalid, k_valid, accepted, is_draft, is_vllm_draft,
        CAST(count(*) AS BIGINT) AS request_steps,
        min(event_time) AS first_event,
        max(event_time) AS last_event
    FROM keyed
    GROUP BY GROUPING SETS (
        (engine_id, model, method, num_spec_tokens, kind, k_zero_reason, k_sched, k_invalid, k_valid, accepted,
         is_draft, is_vllm_draft),
        (engine_id, model, method, num_spec_tokens, bucket_index, k_valid, accepted, is_draft, is_vllm_draft),
        (engine_id, model, method, num_spec_tokens, context_index, kind, k_valid, accepted, is_draft, is_vllm_draft)
    )
)
SELECT
    grain, engine_id, model, method, num_spec_tokens,
    make_timestamp(bucket_index * w.bucket_us) AS bucket_start,
    CAST(context_index * w.context_width AS INTEGER) AS context_start,
    CAST((context_index + 1) * w.context_width AS INTEGER) AS context_end,
    kind, k_zero_reason, k_sched, k_invalid, k_valid, accepted, is_draft, is_vllm_draft,
    request_steps, first_event, last_event
FROM rolled, widths AS w;

COMMENT ON MACRO TABLE report_rollup IS 'One scan, three grouping sets (grain shape, time, context) of request_steps: every count a report needs (t0, t1, bucket, context_tokens).';
