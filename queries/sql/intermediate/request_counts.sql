-- request_counts(width_us, t0, t1): each request's counts per fixed-width time bucket.
--
-- A table macro: one row per time bucket of width_us microseconds (bucket_index =
-- epoch_us(event_time) // width_us; NULL width: one bucket, index 0), group and request with
-- request-steps in the window t0 <= event_time < t1 (NULL: open end): its corrected drafts, its
-- skips for length told apart by its own length, and the draft tokens its collateral skips lost.
-- Every count adds up across buckets and files: collateral_skip_counts adds them up per group, each
-- stored rollup keeps them per minute (file_rollup), and the report reads them (request_counts_from_rollups)
-- for its sections about single requests (reports/data.py).
--
-- Example:
--   SELECT request_id, skips, collateral_skips, lost_draft_tokens FROM request_counts(NULL, NULL, NULL) ORDER BY collateral_skips DESC LIMIT 10
--
-- Columns:
--   bucket_index                                the time bucket (BIGINT; 0 with a NULL width)
--   engine_id, model, method, num_spec_tokens   the group
--   request_id                  vLLM request id (unique within an engine)
--   request_steps               request-steps of the request in the bucket (BIGINT)
--   skips                       of those, skipped for length (BIGINT)
--   collateral_skips            of those, the request alone fit the drafter (BIGINT)
--   own_skips                   of those, the request alone did not fit (BIGINT)
--   lost_draft_tokens           placeholder slots of the collateral skips (BIGINT)
--   num_drafts, num_draft_tokens, num_accepted_tokens   corrected counts (BIGINT)
--   emitted_tokens              tokens committed for the request (BIGINT)
--   first_event, last_event     the first and last event time of the request in the bucket (TIMESTAMP)
CREATE OR REPLACE MACRO request_counts(width_us, t0, t1) AS TABLE
SELECT
    coalesce(epoch_us(event_time) // width_us, 0) AS bucket_index,
    engine_id,
    model,
    method,
    num_spec_tokens,
    request_id,
    CAST(count(*) AS BIGINT) AS request_steps,
    num_skipped(kind) AS skips,
    num_collateral_skips(kind, seq_len, num_spec_tokens, drafter_max_len) AS collateral_skips,
    num_own_skips(kind, seq_len, num_spec_tokens, drafter_max_len) AS own_skips,
    num_lost_draft_tokens(kind, k_valid, seq_len, num_spec_tokens, drafter_max_len) AS lost_draft_tokens,
    num_drafts(kind, k_valid) AS num_drafts,
    num_draft_tokens(kind, k_valid) AS num_draft_tokens,
    num_accepted_tokens(kind, k_valid, accepted) AS num_accepted_tokens,
    CAST(sum(emitted) AS BIGINT) AS emitted_tokens,
    min(event_time) AS first_event,
    max(event_time) AS last_event
FROM request_steps_between(t0, t1)
GROUP BY ALL;

COMMENT ON MACRO TABLE request_counts IS 'Per time bucket of width_us microseconds (NULL: one bucket, index 0), group and request: request-steps, skips for length (collateral, own), draft tokens lost, corrected drafts, tokens emitted, first and last event; window t0 <= event_time < t1.';
