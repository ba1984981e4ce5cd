-- collateral_skips_timeline(bucket := INTERVAL 1 MINUTE, t0 := NULL, t1 := NULL): collateral skips over time.
--
-- A table macro: one row per group and time bucket that has request-steps, with the columns of
-- collateral_skips (where they are described). Buckets are fixed-width and aligned to the Unix
-- epoch, as in acceptance_timeline; t0 and t1 limit the window (t0 <= event_time < t1, NULL: open
-- end). Each request's acceptance rate, which estimates what its collateral skips would have
-- accepted, is taken over the whole window, not per bucket.
--
-- Example:
--   SELECT bucket_start, engine_id, skips, collateral_share, estimated_accepted_tokens FROM collateral_skips_timeline(bucket := INTERVAL 5 MINUTE)
--
-- Columns:
--   bucket_start, bucket_end                    the bucket (TIMESTAMP, UTC; end exclusive)
--   engine_id, model, method, num_spec_tokens   the group
--   request_steps, skips, collateral_skips, own_skips, unknown_skips, collateral_share,
--   lost_draft_tokens, estimated_accepted_tokens, estimated_from_group, num_drafts,
--   num_draft_tokens, num_accepted_tokens, acceptance_rate, mean_acceptance_length,
--   acceptance_rate_had_drafted, mean_acceptance_length_had_drafted   as in collateral_skips
CREATE OR REPLACE MACRO collateral_skips_timeline(bucket := INTERVAL 1 MINUTE, t0 := NULL, t1 := NULL) AS TABLE
WITH width AS (SELECT bucket_us(bucket, 'collateral_skips_timeline') AS us)
SELECT
    make_timestamp(bucket_index * width.us) AS bucket_start,
    make_timestamp((bucket_index + 1) * width.us) AS bucket_end,
    * EXCLUDE (bucket_index, us)
FROM collateral_skip_counts((SELECT us FROM width), t0, t1), width
ORDER BY bucket_start, engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE collateral_skips_timeline IS 'collateral_skips per group and fixed-width time bucket (default 1 minute); window t0 <= event_time < t1.';
