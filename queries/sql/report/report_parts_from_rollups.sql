-- report_parts_from_rollups(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256): what report_counts_from_rollups adds up.
--
-- A window's request-steps per group, time bucket, context bucket and outcome shape in pieces, as
-- they are read: a row per rollup row of its whole minutes (raw_rollups' rows per outcome shape,
-- their dt and hour partitions pruned), and report_counts' rows of its partial first and last
-- minute (bounds that are not whole minutes) from the raw rows. report_counts_from_rollups adds
-- them up; the window's first and last event are their least first_event and greatest last_event,
-- found without adding anything up (how `specmetrics report` finds them before it picks its
-- timeline's width: a fifth of the time at 6.4M request-steps). bucket must be a whole number of
-- minutes and context_tokens a multiple of 256; right only when every data file of the window has
-- its rollup.
--
-- Example:
--   SELECT min(first_event) AS first_event, max(last_event) AS last_event FROM report_parts_from_rollups()
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   bucket_start                                time bucket start (TIMESTAMP, UTC)
--   context_start                               context-length bucket start (INTEGER; NULL when unknown)
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   vllm_counts_differ                          as in audited_request_steps
--   request_steps                               request-steps in the piece (BIGINT)
--   first_event, last_event                     the first and last event_time among them
CREATE OR REPLACE MACRO report_parts_from_rollups(t0 := NULL, t1 := NULL, bucket := INTERVAL 1 MINUTE, context_tokens := 256) AS TABLE
SELECT
    engine_id, model, method, num_spec_tokens,
    make_timestamp(
        epoch_us(minute) // CASE WHEN epoch_us(CAST(bucket AS INTERVAL)) % 60000000 = 0
                                      AND epoch_us(CAST(bucket AS INTERVAL)) > 0
                                 THEN epoch_us(CAST(bucket AS INTERVAL))
                                 ELSE error('report_counts_from_rollups: bucket must be a positive whole number of minutes') END
        * epoch_us(CAST(bucket AS INTERVAL))) AS bucket_start,
    CAST(context_start // CASE WHEN CAST(context_tokens AS INTEGER) % 256 = 0 AND CAST(context_tokens AS INTEGER) > 0
                               THEN CAST(context_tokens AS INTEGER)
                               ELSE error('report_counts_from_rollups: context_tokens must be a positive multiple of 256') END
         * CAST(context_tokens AS INTEGER) AS INTEGER) AS context_start,
    kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted, vllm_counts_differ, request_steps, first_event,
    last_event
FROM raw_rollups
-- the whole minutes: from the first at or after t0 to the last before the one holding t1
WHERE request_id IS NULL AND in_window(minute, dt, hour, whole_minutes_start(t0), whole_minutes_end(t1))
UNION ALL
-- the partial first minute, [t0, the next whole minute); nothing (no file read) without t0
SELECT engine_id, model, method, num_spec_tokens, bucket_start, context_start, kind, k_zero_reason,
       k_sched, k_valid, k_invalid, accepted, vllm_counts_differ, request_steps, first_event, last_event
FROM report_counts(t0 := first_part_start(t0), t1 := first_part_end(t0, t1), bucket := bucket,
                   context_tokens := context_tokens)
UNION ALL
-- the partial last minute, [the last whole minute, t1), unless the first minute holds it
SELECT engine_id, model, method, num_spec_tokens, bucket_start, context_start, kind, k_zero_reason,
       k_sched, k_valid, k_invalid, accepted, vllm_counts_differ, request_steps, first_event, last_event
FROM report_counts(t0 := last_part_start(t0, t1), t1 := last_part_end(t1), bucket := bucket,
                   context_tokens := context_tokens);

COMMENT ON MACRO TABLE report_parts_from_rollups IS 'The pieces report_counts_from_rollups adds up: rollup rows of the whole minutes of the window (t0, t1) and report_counts rows of its partial first and last minute; right only when every data file of the window has its rollup.';
