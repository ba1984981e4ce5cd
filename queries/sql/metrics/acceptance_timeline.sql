-- acceptance_timeline(bucket := INTERVAL 1 MINUTE, t0 := NULL, t1 := NULL): acceptance over time.
--
-- A table macro: one row per group and time bucket that has request-steps, with the corrected
-- and the vLLM-compatible numbers side by side. Buckets are fixed-width and aligned to the Unix
-- epoch (bucket_index = epoch_us(event_time) // epoch_us(bucket); a month counts 30 days); t0 and
-- t1 limit the window (t0 <= event_time < t1, NULL: open end).
--
-- Example:
--   SELECT bucket_start, engine_id, acceptance_rate, vllm_acceptance_rate FROM acceptance_timeline(bucket := INTERVAL 15 MINUTE, t0 := TIMESTAMP '2026-11-30 00:00:00')
--
-- Columns:
--   bucket_start, bucket_end                    the bucket (TIMESTAMP, UTC; end exclusive)
--   engine_id, model, method, num_spec_tokens   the group
--   request_steps                               request-steps in the bucket (BIGINT)
--   num_drafts, num_draft_tokens, num_accepted_tokens           corrected counts (BIGINT)
--   acceptance_rate, mean_acceptance_length                     corrected (DOUBLE; NULL without drafts)
--   vllm_num_drafts, vllm_num_draft_tokens, vllm_num_accepted_tokens   as vLLM counts (BIGINT)
--   vllm_acceptance_rate, vllm_mean_acceptance_length           as vLLM reports (DOUBLE)
CREATE OR REPLACE MACRO acceptance_timeline(bucket := INTERVAL 1 MINUTE, t0 := NULL, t1 := NULL) AS TABLE
WITH width AS (SELECT bucket_us(bucket, 'acceptance_timeline') AS us),
totals AS (
    SELECT
        epoch_us(event_time) // width.us AS bucket_index,
        engine_id,
        model,
        method,
        num_spec_tokens,
        CAST(count(*) AS BIGINT) AS request_steps,
        num_drafts(kind, k_valid) AS num_drafts,
        num_draft_tokens(kind, k_valid) AS num_draft_tokens,
        num_accepted_tokens(kind, k_valid, accepted) AS num_accepted_tokens,
        vllm_num_drafts(k_sched) AS vllm_num_drafts,
        vllm_num_draft_tokens(kind, k_sched, k_valid) AS vllm_num_draft_tokens,
        vllm_num_accepted_tokens(k_sched, accepted) AS vllm_num_accepted_tokens
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
    request_steps,
    num_drafts,
    num_draft_tokens,
    num_accepted_tokens,
    acceptance_rate(num_accepted_tokens, num_draft_tokens) AS acceptance_rate,
    mean_acceptance_length(num_accepted_tokens, num_drafts) AS mean_acceptance_length,
    vllm_num_drafts,
    vllm_num_draft_tokens,
    vllm_num_accepted_tokens,
    acceptance_rate(vllm_num_accepted_tokens, vllm_num_draft_tokens) AS vllm_acceptance_rate,
    mean_acceptance_length(vllm_num_accepted_tokens, vllm_num_drafts) AS vllm_mean_acceptance_length
FROM totals, width
ORDER BY bucket_start, engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE acceptance_timeline IS 'Corrected and vLLM-compatible acceptance rate and mean acceptance length per group and time bucket (bucket := INTERVAL 1 MINUTE, t0, t1).';
