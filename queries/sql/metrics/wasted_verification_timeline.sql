-- wasted_verification_timeline(bucket := INTERVAL 1 MINUTE, t0 := NULL, t1 := NULL): wasted verification over time.
--
-- A table macro: one row per group and time bucket that has request-steps, with the columns of
-- wasted_verification (where they are described): the draft slots the target verified, and those
-- that held no draft (placeholders of steps skipped for length, -1 pads). Buckets are fixed-width
-- and aligned to the Unix epoch, as in acceptance_timeline; t0 and t1 limit the window
-- (t0 <= event_time < t1, NULL: open end).
--
-- Example:
--   SELECT bucket_start, engine_id, wasted_slots, wasted_share FROM wasted_verification_timeline(bucket := INTERVAL 5 MINUTE)
--
-- Columns:
--   bucket_start, bucket_end                    the bucket (TIMESTAMP, UTC; end exclusive)
--   engine_id, model, method, num_spec_tokens   the group
--   verified_slots, placeholder_slots, pad_slots, wasted_slots, wasted_share   as in wasted_verification
CREATE OR REPLACE MACRO wasted_verification_timeline(bucket := INTERVAL 1 MINUTE, t0 := NULL, t1 := NULL) AS TABLE
WITH width AS (SELECT bucket_us(bucket, 'wasted_verification_timeline') AS us),
slots AS (
    SELECT
        epoch_us(event_time) // width.us AS bucket_index,
        engine_id,
        model,
        method,
        num_spec_tokens,
        num_verified_slots(kind, k_sched) AS verified_slots,
        num_placeholder_slots(kind, k_valid) AS placeholder_slots,
        num_pad_slots(kind, k_sched, k_valid) AS pad_slots
    FROM request_steps_between(t0, t1), width
    GROUP BY ALL
)
SELECT
    make_timestamp(bucket_index * width.us) AS bucket_start,
    make_timestamp((bucket_index + 1) * width.us) AS bucket_end,
    engine_id,
    model,
    method,
    num_spec_tokens,
    verified_slots,
    placeholder_slots,
    pad_slots,
    placeholder_slots + pad_slots AS wasted_slots,
    (placeholder_slots + pad_slots) / nullif(verified_slots, 0) AS wasted_share
FROM slots, width
ORDER BY bucket_start, engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE wasted_verification_timeline IS 'wasted_verification per group and fixed-width time bucket (default 1 minute); window t0 <= event_time < t1.';
